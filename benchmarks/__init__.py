"""The measurements behind docs/benchmarks.md, each run from the repository's root as
`python -m benchmarks.<name>` (`PYTHONPATH=scripts` where torchrig is not installed):
`startup` and `stop` (the workstation's start and stop), `launcher` (torchrig launch against
torchrun), `checkpoint_io` (checkpoint saves and loads against raw disk I/O), `train_throughput`
(the example's defaults, DDP's cost, torch.compile's modes) and `gpu_report` (`make
gpu-report`). They import the package and `testbed/`, never `tests/`."""

from __future__ import annotations

import json
import os
import statistics


def print_medians(runs: list[dict[str, float]], as_json: bool) -> None:
    """Each figure's median over `runs` and every run's value, as one JSON document or a line
    per figure with the load average."""
    summary = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    if as_json:
        print(json.dumps({"runs": runs, "median": summary}, indent=2))
        return
    for key, value in summary.items():
        spread = ", ".join(f"{run[key]:.2f}" for run in runs)
        print(f"{key:21s} median {value:.2f} s  (runs: {spread})")
    print(f"load average: {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cores")
