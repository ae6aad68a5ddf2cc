"""Users' own code under the launcher: how many runs out of N exit 0 with the job run once, and
how long a restart round takes to start after a worker died.

    python benchmarks/own_code.py --runs 20 [--spawn-runs 60] [--load] [--without-fixes] > out.json

Runs tests/users_code/ on 2 CPU processes with `--max-restarts 1`, the image's `.pth` line in
every interpreter; `--without-fixes`: plain torchrun, for the comparison; `--load`: every core
kept busy meanwhile. docs/benchmarks.md, "Users' own code": the method and the figures.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from torchrig import children

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testbed.image_hook import with_image_hook  # noqa: E402

# A run this much longer than the seconds a good one takes hangs (the restart bug's other face).
HANG_S = 120
CODE = REPO / "tests" / "users_code"
SCRIPTS = {
    "plain": ("plain_dist.py",),
    "accelerate": ("accelerate_train.py",),
    "fabric": ("fabric_train.py", "2"),
}


def spin() -> None:
    while True:
        pass


def environment(without_fixes: bool) -> dict[str, str]:
    """The image's environment: its `.pth` line in every interpreter; without the fixes, off."""
    env = with_image_hook({**os.environ, "OMP_NUM_THREADS": "1"})
    if without_fixes:
        env["TORCHRIG_RANK_EXIT"] = "off"
        env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "0"
    return env


def command(script: tuple[str, ...], out: Path, without_fixes: bool, *extra: str) -> list[str]:
    launcher = (
        [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        if without_fixes
        else [sys.executable, "-m", "torchrig", "launch"]
    )
    name, *args = script
    return [*launcher, "--nproc-per-node", "2", "--max-restarts", "1", str(CODE / name),
            str(out), *args, *extra]  # fmt: skip


def one_run(argv: list[str], env: dict[str, str], out: Path | None = None) -> str:
    """'ok', or why the run was bad; with `out`, it must also have run every rank once."""
    code = children.run(argv, HANG_S, env).returncode
    if code is None:
        return f"hung ({HANG_S} s)"
    if code != 0:
        return f"exit {code}"
    log = out / "runs.log" if out else None
    runs = log.read_text().splitlines() if log and log.exists() else []
    if log and sorted(line.split()[1] for line in runs) != ["0", "1"]:
        return f"ran {len(runs) // 2} times"
    return "ok"


def tally(outcomes: list[str]) -> dict:
    failures = sorted({o: outcomes.count(o) for o in outcomes if o != "ok"}.items())
    return {"good": outcomes.count("ok"), "of": len(outcomes), "failures": failures}


def restart_time(out: Path) -> float | None:
    killed = out / "killed"
    round_1 = sorted(out.glob("started-*-1"))
    if not killed.exists() or not round_1:
        return None
    first = min(float(path.read_text()) for path in round_1)
    return first - float(killed.read_text())


def measure(runs: int, spawned: int, without_fixes: bool) -> dict:
    env = environment(without_fixes)
    outcomes = []
    for _ in range(spawned):
        with tempfile.TemporaryDirectory() as folder:
            outcomes.append(one_run([sys.executable, str(CODE / "spawn_ddp.py"), folder], env))
    results: dict = {"spawn": tally(outcomes)}
    for name, script in SCRIPTS.items():
        outcomes = []
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as folder:
                out = Path(folder)
                outcomes.append(one_run(command(script, out, without_fixes), env, out))
        results[name] = tally(outcomes)
    times, good = [], 0
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder)
            argv = command(SCRIPTS["plain"], out, without_fixes, "--kill-rank", "1")
            code = children.run(argv, HANG_S, env).returncode
            if code == 0 and len(list(out.glob("result-*.txt"))) == 2:
                good += 1
                seconds = restart_time(out)
                if seconds is not None:
                    times.append(seconds)
    results["restart"] = {
        "good": good,
        "of": runs,
        "death_to_next_round_s_median": round(statistics.median(times), 2) if times else None,
        "death_to_next_round_s_max": round(max(times), 2) if times else None,
    }
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--spawn-runs", type=int, help="runs of the mp.spawn case (3 x --runs)")
    parser.add_argument("--load", action="store_true", help="keep every core busy meanwhile")
    parser.add_argument("--without-fixes", action="store_true", help="plain torchrun, no fixes")
    args = parser.parse_args()
    spawned = 3 * args.runs if args.spawn_runs is None else args.spawn_runs
    if args.runs < 1 or spawned < 1:
        parser.error("--runs and --spawn-runs must be >= 1")
    spinners = []
    if args.load:
        spinners = [multiprocessing.Process(target=spin, daemon=True)
                    for _ in range(os.cpu_count() or 1)]  # fmt: skip
        for spinner in spinners:
            spinner.start()
    started = time.time()
    try:
        results = measure(args.runs, spawned, args.without_fixes)
    finally:
        for spinner in spinners:
            spinner.terminate()
    print(json.dumps({"load": args.load, "without_fixes": args.without_fixes,
                      "seconds": round(time.time() - started),
                      "loadavg_1min_at_end": round(os.getloadavg()[0], 2), **results},
                     indent=2))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
