"""Time from `docker compose up -d` (or `make up`) to both services answering, and `import torch`.

    python -m benchmarks.startup [--repeats 5] [--cpu] [--json]
    python -m benchmarks.startup --make-up [--from stopped] [--repeats 5] [--cpu] [--json]

Each repeat takes the stack down (or stops it) and times its start to both services answering,
then Jupyter's CPU time and `import torch` (docs/benchmarks.md, "Start-up"). Its own compose
project, free ports and temporary folders leave a running workstation alone; needs `make build`.
"""

from __future__ import annotations

import argparse
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from benchmarks import print_medians
from testbed import free_port

REPO = Path(__file__).resolve().parent.parent

# A second copy of the repository (another branch) benchmarks beside this one under its own name.
PROJECT = os.environ.get("TORCHRIG_BENCH_PROJECT", "torchrig-bench")
# Each probe gives up after this long and tries again. Until the container's network is up,
# Docker's port proxy accepts a connection and holds it (its own connection attempt waits about
# a second to be retried), so a long timeout would measure the proxy, not the service.
PROBE_S = 0.1
IMPORT_TORCH = "import time; t = time.perf_counter(); import torch; print(time.perf_counter() - t)"
# CPU seconds Jupyter's process has used (user + system): its start-up work, which a loaded
# machine stretches on the wall clock but hardly changes.
JUPYTER_CPU = """
from torchrig.facts.processes import read_processes
for process in read_processes():
    if any(arg.endswith("jupyter-lab") for arg in process.argv):
        print(process.cpu_s)
"""


def compose_argv(cpu: bool) -> list[str]:
    """`docker compose` of this checkout; the project is the environment's COMPOSE_PROJECT_NAME."""
    files = ["-f", "docker-compose.yml"] + (["-f", "docker-compose.cpu.yml"] if cpu else [])
    return ["docker", "compose", *files]


def compose(args: list[str], env: dict[str, str], cpu: bool) -> subprocess.CompletedProcess:
    command = [*compose_argv(cpu), *args]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=True)


def jupyter_answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=PROBE_S) as response:
            return response.status == 200
    except OSError:  # URLError and timeouts too
        return False


def sshd_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=PROBE_S) as sock:
            return sock.recv(4) == b"SSH-"
    except OSError:
        return False


def start_command(make_up: bool, cpu: bool) -> list[str]:
    """What starts the stack: compose itself, or `make up` as a person types it."""
    if make_up:
        return ["make", "-s", "up", *(["CPU=1"] if cpu else [])]
    return [*compose_argv(cpu), "up", "-d"]


def time_up(
    env: dict[str, str], cpu: bool, ports: tuple[int, int], make_up: bool, from_stopped: bool
) -> dict[str, float]:
    """Seconds from the start command to each service answering and to the command's return,
    each taken when the answer arrives (a probe the port proxy holds must not count from its
    start)."""
    compose(["stop" if from_stopped else "down", "-t", "5"], env, cpu)
    start = time.perf_counter()
    starting = subprocess.Popen(
        start_command(make_up, cpu),
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    ready: dict[str, float] = {}
    output: list[str] = []
    deadline = start + 120

    def wait_for_command() -> None:
        output.append(starting.communicate()[0])
        ready["command_s"] = time.perf_counter() - start

    def poll(name: str, answers: Callable[[], bool]) -> None:
        while time.perf_counter() < deadline:
            if answers():
                ready[name] = time.perf_counter() - start
                return
            time.sleep(0.02)

    # One thread each, so that a probe held open by the port proxy delays no other figure.
    threads = [
        threading.Thread(target=wait_for_command, daemon=True),
        threading.Thread(target=poll, args=("jupyter_s", lambda: jupyter_answers(ports[0]))),
        threading.Thread(target=poll, args=("sshd_s", lambda: sshd_answers(ports[1]))),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.perf_counter()))
    said = "".join(output)
    if len(ready) < 3:
        starting.kill()
        raise SystemExit(f"not ready within 120 s: {ready}\n{said}")
    if starting.returncode != 0 or (make_up and "/lab?token=" not in said):
        raise SystemExit(f"{shlex.join(starting.args)} exited {starting.returncode}:\n{said}")
    ready["both_s"] = max(ready["jupyter_s"], ready["sshd_s"])
    return ready


def in_container(code: str, user: str, env: dict[str, str], cpu: bool) -> float:
    """The number the Python `code` prints last, run in the workstation as `user`."""
    result = compose(["exec", "-T", "-u", user, "workstation", "python", "-c", code], env, cpu)
    return float(result.stdout.strip().splitlines()[-1])


def bench_env(folder: Path, ports: tuple[int, int], project: str = PROJECT) -> dict[str, str]:
    for name in ("workspace", "checkpoints", "data"):
        (folder / name).mkdir()
        if os.geteuid() == 0:  # dev (1000) must be able to write its mounts
            os.chown(folder / name, 1000, 1000)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / "key")], check=True
    )
    variables = {
        "JUPYTER_PORT": str(ports[0]),
        "SSH_PORT": str(ports[1]),
        "WORKSPACE_DIR": str(folder / "workspace"),
        "CHECKPOINT_DIR": str(folder / "checkpoints"),
        "DATA_DIR": str(folder / "data"),
        "SSH_PUBLIC_KEY": (folder / "key.pub").read_text().strip(),
        "PUID": "1000",
        "PGID": "1000",
    }
    # `make up` reads this file instead of the repository's .env (and writes none).
    env_file = folder / "bench.env"
    env_file.write_text("".join(f"{key}={value}\n" for key, value in variables.items()))
    return {
        **os.environ,
        **variables,
        "COMPOSE_PROJECT_NAME": project,
        "COMPOSE_ENV_FILES": str(env_file),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpu", action="store_true", help="CPU mode (no NVIDIA runtime)")
    parser.add_argument("--make-up", action="store_true", help="time `make up`, not compose")
    parser.add_argument(
        "--from",
        dest="start_from",
        choices=("removed", "stopped"),
        default="removed",
        help="start each repeat from a removed container (`down`) or a stopped one (`stop`)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    ports = (free_port(), free_port())
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        env = bench_env(Path(tmp), ports)
        try:
            stopped = args.start_from == "stopped"
            if stopped:  # a container to stop before each repeat
                first = start_command(args.make_up, args.cpu)
                subprocess.run(first, cwd=REPO, env=env, capture_output=True, check=True)
            for _ in range(args.repeats):
                run = time_up(env, args.cpu, ports, args.make_up, stopped)
                run["jupyter_cpu_s"] = in_container(JUPYTER_CPU, "root", env, args.cpu)
                run["import_torch_s"] = in_container(IMPORT_TORCH, "dev", env, args.cpu)
                runs.append(run)
        finally:
            compose(["down", "-v", "-t", "5"], env, args.cpu)
    print_medians(runs, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
