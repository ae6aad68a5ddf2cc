"""How the report runs its children: each part's sizes and time budget, one child at a time with
its log written as it runs, one part within its deadline and the report's."""

from __future__ import annotations

import math
import os
import shlex
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchrig.facts import children

from testbed import image_hook

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Sizes:
    """How big each part's work is: a real workload on a GPU, the smallest that runs on a CPU;
    and how long each part may take, its children together."""

    device: str
    model: str
    batch_size: int
    image_size: int
    steps: int
    warmup: int
    modes_model: str  # the compile modes part's: the example's own
    resume: str  # the example's arguments for the kill-and-resume runs
    step_delay: float  # slows the run to be killed, so the kill lands mid-run
    nproc: int | None  # None: one process per GPU
    checkpoint_mb: int
    budgets: dict[str, float]  # seconds per part; a part missing here gets what is left
    total_s: float  # the whole report's: a part never runs past it


RESUME_COMMON = "--fsdp --log-every 1 --seed 7"
# One H100 gives the report 7 minutes (one 10-minute call, with room to install and copy): 410 s
# for the parts, the rest for writing and exiting. Expected there, from the first run: verify
# 75 s, compile 95, training 45, resume 100, checkpoint 30, tests 50; "modes" runs last and gets
# what is left of its budget (three cold compiles: alone, `--only modes`, it has them all).
GPU_BUDGETS = {"verify": 110, "compile": 120, "training": 80, "resume": 120, "checkpoint": 45,
               "tests": 75, "modes": 300}  # fmt: skip
GPU = Sizes(
    "cuda", "resnet50", 128, 224, 50, 10, "resnet18",
    "--device cuda --model resnet18 --image-size 64 --num-classes 100 --synthetic-size 8192 "
    f"--batch-size 64 --steps 30 --warmup-steps 3 --checkpoint-every 10 {RESUME_COMMON}",
    0.5, None, 1000, GPU_BUDGETS, 410,
)  # fmt: skip
# A CPU shared with others: generous, the parts' own figures are only shown.
CPU = Sizes(
    "cpu", "tiny", 16, 32, 5, 2, "tiny",
    "--device cpu --model tiny --image-size 8 --num-classes 4 --synthetic-size 96 "
    f"--batch-size 4 --steps 12 --warmup-steps 2 --checkpoint-every 4 {RESUME_COMMON}",
    0.6, 2, 20, dict.fromkeys(GPU_BUDGETS, 1200), math.inf,
)  # fmt: skip
MIN_PART_S = 10  # a part with less than this left is not started


class Failed(Exception):
    """A part could not do its job; the message says why."""


class Interrupted(BaseException):
    """SIGTERM: a BaseException, so that no `except Exception` of a part swallows it."""


def say(message: str) -> None:
    print(f"gpu-report: {message}", file=sys.stderr, flush=True)


@dataclass
class Run:
    """One report: its settings, where it writes, and how it runs a child."""

    out: Path
    sizes: Sizes
    env: dict[str, str]
    cache: Path  # a fresh TORCHINDUCTOR_CACHE_DIR for the compiling parts
    gpus: int
    disk: Path
    deadline: float = math.inf  # the running part's (time.monotonic())

    @property
    def cpu(self) -> bool:
        return self.sizes.device == "cpu"

    def child(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        merged: bool = False,
        stop_when: Callable[[], bool] | None = None,
        limit_s: float = math.inf,
    ) -> children.Outcome:
        """Run `argv` until it ends, `stop_when()` holds, `limit_s` or the part's deadline passes
        (then it is killed); its output lands in logs/<name>.log as it comes, and the console
        gets a line when it starts and one when it ends."""
        log = self.out / "logs" / f"{name}.log"
        seconds = max(1.0, min(limit_s, self.deadline - time.monotonic()))
        say(f"  {name}: started, {seconds:.0f} s left, output in {log.relative_to(self.out)}")
        child = children.start(argv, env or self.env, cwd=REPO, merged=merged)
        live = LiveLog(log, argv, child)
        try:
            end = time.monotonic() + seconds
            while child.process.poll() is None and not (stop_when and stop_when()):
                if time.monotonic() >= end:
                    child.killed = True  # kill_and_reap does it
                    break
                live.copy()
                time.sleep(children.POLL_S)
        finally:
            children.kill_and_reap([child])
            live.close()
        done = children.outcome_of(child)
        write_log(log, argv, done)
        say(f"  {name}: {status_of(done)} after {done.seconds:.1f} s")
        return done

    def compiling_env(self) -> dict[str, str]:
        """The fresh cache, Triton's inside it: a global one would make a cold compile warm."""
        env = {**self.env, "TORCHINDUCTOR_CACHE_DIR": str(self.cache)}
        env.pop("TRITON_CACHE_DIR", None)
        return env

    def json_of(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> dict:
        done = self.child(name, argv, env)
        result = children.last_json_object(done.stdout)
        if not done.ok or result is None:
            raise Failed(f"{name}: {why(done)}")
        return result


class LiveLog:
    """A child's output appended to its log while it runs, so that a part killed with the report
    keeps what it printed. It reads the child's files at its own offsets (os.pread): the
    child's file position, which it shares, stays where the child writes."""

    def __init__(self, path: Path, argv: list[str], child: children.Child) -> None:
        merged = child.stderr is child.stdout
        self.sources = [child.stdout] if merged else [child.stdout, child.stderr]
        self.offsets = [0] * len(self.sources)
        self.log = path.open("wb")
        self.log.write(f"$ {shlex.join(argv)}\n# running: its output as it comes\n".encode())
        self.log.flush()

    def copy(self) -> None:
        for index, source in enumerate(self.sources):
            while chunk := os.pread(source.fileno(), 1 << 16, self.offsets[index]):
                self.log.write(chunk)
                self.offsets[index] += len(chunk)
        self.log.flush()

    def close(self) -> None:
        self.log.close()


def status_of(done: children.Outcome) -> str:
    return "killed at the deadline" if done.timed_out else f"exit {done.returncode}"


def write_log(path: Path, argv: list[str], done: children.Outcome) -> None:
    """The whole log once the child has ended: its command, status and both streams."""
    path.write_text(
        f"$ {shlex.join(argv)}\n# {status_of(done)} after {done.seconds:.1f} s\n"
        f"--- stdout ---\n{done.stdout}\n--- stderr ---\n{done.stderr}"
    )


def why(done: children.Outcome) -> str:
    """How a child ended and its last line, for a part's reason."""
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    last = lines[-1][:300] if lines else "no output"
    return f"{'killed at its deadline' if done.timed_out else f'exit {done.returncode}'}: {last}"


def run_part(
    name: str, part: Callable[[Run], dict[str, Any]], run: Run, report_deadline: float
) -> dict[str, Any]:
    """One part within its budget and the report's; a part with too little time left is not
    started. What went wrong, the report's own bugs included, is the part's reason."""
    before = set((run.out / "logs").iterdir())
    begin = time.monotonic()
    run.deadline = min(begin + run.sizes.budgets.get(name, math.inf), report_deadline)
    status, reason, figures = "ok", None, {}
    try:
        if run.deadline - begin < MIN_PART_S:
            raise Failed(f"not started: the report's {run.sizes.total_s:g} s were spent")
        figures = part(run)
    except Failed as exc:
        status, reason = "failed", str(exc)
    except (Interrupted, KeyboardInterrupt) as exc:
        status, reason = "failed", f"interrupted ({exc or 'Ctrl-C'}): the later parts did not run"
    except Exception as exc:  # a bug in the report itself: keep going
        status, reason = "failed", f"the report's own code raised {type(exc).__name__}: {exc}"
    logs = sorted(str(p.relative_to(run.out)) for p in set((run.out / "logs").iterdir()) - before)
    return {"status": status, "seconds": round(time.monotonic() - begin, 2), "reason": reason,
            "figures": figures, "logs": logs}  # fmt: skip


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What every part's children run with: this checkout's package, and the image's rank-exit
    hook, so that a torchrun worker ends as it does in the image (without it a rank can abort
    in Python's teardown after its training, by chance, and fail the part)."""
    path = os.pathsep.join(filter(None, [str(REPO / "scripts"), environ.get("PYTHONPATH")]))
    env = {**environ, "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}
    return image_hook.with_image_hook(env)
