"""The GPU report: one command that proves a CUDA machine (`make gpu-report`, docs/gpu-report.md).

    python -m benchmarks.gpu_report [--cpu] [--out DIR] [--only PART,...] [--checkpoint-dir DIR]

It runs the parts in order, each within its budget and the report's, and writes report.json and
report.md after each; the markdown is printed at the end. Exit 0, 1 when a part failed or a
target was missed, 2 on bad input or, without --cpu, no GPU. SIGTERM stops it: the running child
is killed and the report written.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import shlex
import shutil
import signal
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from torchrig.facts import nvml

from benchmarks.gpu_report import render, runner
from benchmarks.gpu_report.parts import PARTS
from benchmarks.gpu_report.runner import say


def machine() -> dict[str, Any]:
    """GPUs and driver from NVML, versions from package metadata: nothing here starts CUDA, so
    the report's own process never shows up on the GPU."""
    snapshot = nvml.read_inventory()
    versions = {}
    for name in ("torch", "torchvision", "nvidia-ml-py"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "host": platform.node(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "driver": snapshot.driver_version,
        "nvml_error": snapshot.error,
        "gpus": [gpu.name for gpu in snapshot.gpus] if snapshot.available else [],
        "packages": versions,
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpu_report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", action="store_true", help="run on the CPU with tiny sizes")
    parser.add_argument("--out", type=Path, help="report folder (default: ./gpu-report-<time>)")
    parser.add_argument("--only", help=f"comma-separated parts (of {', '.join(PARTS)})")
    parser.add_argument("--checkpoint-dir", type=Path, help="disk for the checkpoint part")
    parser.add_argument("--keep-cache", action="store_true", help="keep its compile cache folder")
    return parser.parse_args(argv)


def prepare(args: argparse.Namespace, stamp: str) -> tuple[list[str], Path, Path, Path]:
    """The parts, the report folder, the checkpoint disk, a fresh compile cache; ValueError
    says what to fix."""
    wanted = [p.strip() for p in (args.only or ",".join(PARTS)).split(",") if p.strip()]
    if not wanted or set(wanted) - set(PARTS):
        raise ValueError(f"--only {args.only!r}: choose from {', '.join(PARTS)}")
    out = (args.out or Path(f"gpu-report-{stamp}")).resolve()
    try:
        (out / "logs").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--out {out}: cannot create it ({exc.strerror})") from None
    disk = (args.checkpoint_dir or out).resolve()
    if not disk.is_dir():
        raise ValueError(f"--checkpoint-dir {disk}: no such folder")
    # Inside TORCHINDUCTOR_CACHE_DIR (the container's cache volume), else the report folder: a
    # new folder, so the first compile is cold whatever ran before.
    root = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    cache = Path(root or out) / f"gpu-report-{stamp}-{os.getpid()}"
    try:
        cache.mkdir(parents=True)
    except OSError as exc:
        raise ValueError(f"cannot create the compile cache {cache} ({exc.strerror})") from None
    return [p for p in PARTS if p in wanted], out, disk, cache


def interrupt(signum: int, _frame: object) -> None:
    raise runner.Interrupted(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args, started, begin = parse_args(argv), datetime.now().astimezone(), time.monotonic()
    env = machine()
    try:
        if not args.cpu and not env["gpus"]:
            raise ValueError(f"no GPU visible ({env['nvml_error'] or 'NVML lists none'}); on a "
                             "machine without one run `make gpu-report ARGS=--cpu`")  # fmt: skip
        wanted, out, disk, cache = prepare(args, started.strftime("%Y%m%d-%H%M%S"))
    except ValueError as exc:
        say(str(exc))
        return render.EXIT_BAD_INPUT
    env["compile_cache"] = {"folder": str(cache), "kept": args.keep_cache}
    sizes = runner.CPU if args.cpu else runner.GPU
    run = runner.Run(
        out, sizes, runner.child_environment(os.environ), cache, len(env["gpus"]), disk
    )
    parts: dict[str, dict[str, Any]] = {}

    def save() -> dict[str, Any]:
        """The report as it stands: written again after every part, so a cut one keeps them."""
        header = {"command": "python -m benchmarks.gpu_report " + shlex.join(argv),
                  "started": started.isoformat(timespec="seconds"),
                  "elapsed_s": round(time.monotonic() - begin, 1)}  # fmt: skip
        report = render.document(header, env, parts, args.cpu)
        render.write(out, report)
        return report

    signal.signal(signal.SIGTERM, interrupt)
    report_deadline = begin + run.sizes.total_s
    try:
        for number, name in enumerate(wanted, 1):
            say(f"[{number}/{len(wanted)}] {name}")
            part = parts[name] = runner.run_part(name, PARTS[name], run, report_deadline)
            say(f"[{number}/{len(wanted)}] {name}: {part['status']} {part['seconds']:.0f} s "
                f"{part['reason'] or ''}")  # fmt: skip
            save()
            if (part["reason"] or "").startswith("interrupted"):
                break
    finally:
        if not args.keep_cache:
            shutil.rmtree(cache, ignore_errors=True)
    report = save()
    print((out / "report.md").read_text())
    say(f"report: {out / 'report.md'} and report.json; exit {report['exit_code']}")
    return int(report["exit_code"])


if __name__ == "__main__":
    sys.exit(main())
