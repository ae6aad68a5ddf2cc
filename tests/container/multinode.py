"""What the multi-node tests ask of the emulated nodes (tests/machines/docker_nodes.py): a launch
run to its end or in the background, the launcher's pid, each host's lines and the launcher's
notes, the final weights compared, the job's processes left over."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from testbed import wait_until
from tests.machines.docker_nodes import RUN_TIMEOUT_S, Node, launch_argv


def run_launch(node: Node, *args: str) -> tuple[int, str]:
    """Run `torchrig launch` to its end; (exit status, output of both streams)."""
    result = subprocess.run(
        launch_argv(node, *args),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S + 60,
        check=False,
    )
    return result.returncode, result.stdout + result.stderr


@dataclass
class Background:
    """A launch running in the background, its output going to a file on this machine."""

    process: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, node: Node, log: Path, *args: str) -> Background:
        with log.open("wb") as out:
            process = subprocess.Popen(
                launch_argv(node, *args), stdout=out, stderr=subprocess.STDOUT
            )
        return cls(process, log)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, what: str, condition: Callable[[str], bool], timeout_s: float = 600) -> None:
        """Until `condition(output)`; fails early, with the output, if the launch ends first."""

        def probe() -> bool:
            if condition(self.output()):
                return True
            if self.process.poll() is not None:
                raise AssertionError(
                    f"the launch exited {self.process.returncode} before {what}:\n"
                    f"{self.output()[-6000:]}"
                )
            return False

        wait_until(what, probe, timeout_s=timeout_s, on_timeout=lambda: self.output()[-6000:])

    def finish(self, timeout_s: float = RUN_TIMEOUT_S) -> int:
        return self.process.wait(timeout=timeout_s)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()


def launcher_pid(node: Node, marker: str) -> int:
    """The pid of the `torchrig launch` process on `node` whose command line has `marker`."""
    found = [
        pid
        for pid, args in node.processes()
        if "bin/torchrig launch " in args and marker in args and not args.startswith("timeout")
    ]
    if len(found) != 1:
        raise AssertionError(f"expected one launcher with {marker!r} on {node.name}: {found}")
    return found[0]


def host_lines(output: str, host: str) -> list[str]:
    prefix = re.compile(rf"^{re.escape(host)}\s*: ")
    return [prefix.sub("", line) for line in output.splitlines() if prefix.match(line)]


def notes(output: str) -> list[str]:
    """The launcher's own messages."""
    return [line for line in output.splitlines() if line.startswith("torchrig launch: ")]


def same_weights(node: Node, first: str, second: str) -> tuple[bool, str]:
    """Whether two saved state dicts hold bitwise-equal tensors (compared in the node)."""
    compare = (
        "import sys, torch\n"
        "a, b = (torch.load(p, map_location='cpu', weights_only=True) for p in sys.argv[1:])\n"
        "assert a.keys() == b.keys(), (sorted(a), sorted(b))\n"
        "different = [k for k in a if not torch.equal(a[k], b[k])]\n"
        "print('different:', different)\n"
        "sys.exit(1 if different else 0)\n"
    )
    code, output = node.exec(f"python -c {shlex.quote(compare)} {first} {second}")
    return code == 0, output


def world_sizes(output: str) -> list[int]:
    """The world size of every (re)start, from rank 0's "tiny on N x cpu" line."""
    return [int(size) for size in re.findall(r"tiny on (\d+) x cpu", output)]


def leftovers(nodes: Iterable[Node]) -> dict[str, list[tuple[int, str]]]:
    return {node.name: node.job_processes() for node in nodes if node.job_processes()}
