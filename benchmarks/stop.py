"""Time `docker compose stop`: idle, and with a training job that must save first.

    python -m benchmarks.stop [--repeats 3] [--cpu]      # prints JSON: each run, medians

Steps lost: the last step any rank trained less the step the job saved (docs/benchmarks.md,
"Stopping the container without losing training"). Needs a built image (`make build`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.startup import REPO, bench_env, compose
from testbed import free_port, traced_train

PROJECT = "torchrig-bench-stop"
ARGS = (
    "--device cpu --model tiny --image-size 8 --num-classes 4 --synthetic-size 96 --batch-size 4 "
    "--steps 200 --step-delay 0.6 --checkpoint-every 1000 --log-every 1 "
    "--checkpoint-dir /checkpoints/run --log-samples /checkpoints/samples.jsonl"
)
SCRIPT = shlex.join(traced_train.command("train_ddp.py", ARGS.split(), traced_train.PATH.name))
TRAIN = (
    "cd /workspace && OMP_NUM_THREADS=1 nohup torchrun --standalone --nproc-per-node 2 "
    f"{SCRIPT} > /checkpoints/train.log 2>&1 &"
)
SAVED = re.compile(r"saved step (\d+) in /checkpoints/run; exiting with 75")


def timed_stop(env: dict[str, str], cpu: bool) -> float:
    start = time.perf_counter()
    compose(["stop"], env, cpu)
    return time.perf_counter() - start


def last_trained_step(samples: Path) -> int:
    lines = samples.read_text().splitlines() if samples.is_file() else []
    return max((json.loads(line)["step"] for line in lines), default=0)


def stop_while_training(env: dict[str, str], cpu: bool, folder: Path) -> dict[str, float]:
    checkpoints = folder / "checkpoints"
    for name in ("run", "samples.jsonl", "train.log"):
        target = checkpoints / name
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    compose(["exec", "-T", "-u", "dev", "workstation", "sh", "-c", TRAIN], env, cpu)
    deadline = time.monotonic() + 300
    while last_trained_step(checkpoints / "samples.jsonl") <= 4:
        if time.monotonic() > deadline:
            raise SystemExit(f"no step 5 within 300 s:\n{(checkpoints / 'train.log').read_text()}")
        time.sleep(0.2)
    stop_s = timed_stop(env, cpu)
    log = (checkpoints / "train.log").read_text(errors="replace")
    saved = SAVED.search(log)
    if saved is None:
        raise SystemExit(f"the job did not save on the stop:\n{log[-3000:]}")
    trained = last_trained_step(checkpoints / "samples.jsonl")
    return {"training_stop_s": stop_s, "steps_lost": trained - int(saved.group(1))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, choices=range(1, 21), metavar="1..20")
    parser.add_argument("--cpu", action="store_true", help="CPU mode (no NVIDIA runtime)")
    args = parser.parse_args()
    ports = (free_port(), free_port())
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = bench_env(folder, ports, PROJECT)
        shutil.copy(REPO / "examples" / "train_ddp.py", folder / "workspace")
        shutil.copy(traced_train.PATH, folder / "workspace")
        try:
            for _ in range(args.repeats):
                compose(["up", "-d", "--wait"], env, args.cpu)
                run = {"idle_stop_s": timed_stop(env, args.cpu)}
                compose(["up", "-d", "--wait"], env, args.cpu)
                run.update(stop_while_training(env, args.cpu, folder))
                runs.append(run)
        finally:
            compose(["down", "-v", "-t", "5"], env, args.cpu)
    medians = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    load = round(os.getloadavg()[0], 1)
    print(json.dumps({"runs": runs, "median": medians, "load_average_1min": load}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
