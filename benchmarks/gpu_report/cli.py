"""`python -m benchmarks.gpu_report [--cpu] [--out DIR] [--only PART,...]` (`make gpu-report`).

Runs the parts in order, judges the targets, writes report.json and report.md into the folder
(after every part, with every child's log and raw output beside them), prints the markdown, and
exits 1 when a part failed or a target was missed, 0 otherwise; 2 on bad input or, without --cpu,
no GPU. SIGTERM stops it cleanly: the running part's children are killed and the report written.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from . import machine, parts, render, targets

SCHEMA = "torchrig.gpu_report/1"
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(ValueError):
    """Something to fix before the report can run; the message says what."""


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="gpu_report",
        description="Prove a CUDA machine: gpu tests, torchrig verify, training and compile "
        "benchmarks, FSDP2 kill and resume, checkpoint I/O; one JSON and one markdown report.",
        epilog="parts, in order: "
        + "; ".join(f"{name}: {text}" for name, text in parts.PART_HELP.items()),
    )
    parser.add_argument("--cpu", action="store_true", help="run on the CPU with tiny sizes")
    parser.add_argument("--out", type=Path, help="report folder (default: ./gpu-report-<time>)")
    parser.add_argument("--only", help="comma-separated parts to run (default: all)")
    parser.add_argument(
        "--checkpoint-dir", type=Path, help="disk for the checkpoint part (default: the folder)"
    )
    parser.add_argument(
        "--keep-cache", action="store_true", help="keep the compile cache folder it creates"
    )
    return parser.parse_args(argv)


def selected_parts(only: str | None) -> list[str]:
    if only is None:
        return list(parts.PARTS)
    wanted = [name.strip() for name in only.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in parts.PARTS]
    if unknown or not wanted:
        raise BadInput(
            f"--only {only!r}: unknown part(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(parts.PARTS)}"
        )
    return [name for name in parts.PARTS if name in wanted]  # always in the running order


def prepare_folder(out: Path | None, stamp: str) -> Path:
    folder = out or Path(f"gpu-report-{stamp}")
    if folder.exists() and not folder.is_dir():
        raise BadInput(f"--out {folder}: exists and is not a folder")
    try:
        (folder / "logs").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--out {folder}: cannot create it ({exc.strerror})") from None
    if not os.access(folder, os.W_OK):
        raise BadInput(f"--out {folder}: not writable by this user")
    return folder.resolve()


def checkpoint_disk(given: Path | None, folder: Path) -> Path:
    if given is None:
        return folder
    if not given.is_dir():
        raise BadInput(f"--checkpoint-dir {given}: no such folder")
    return given.resolve()


def fresh_compile_cache(folder: Path, stamp: str) -> tuple[Path, bool]:
    """A new folder inside TORCHINDUCTOR_CACHE_DIR (the container's cache volume) or, without
    it, inside the report folder: the first compile is then cold whatever ran before."""
    root = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    base = Path(root) if root else folder / "inductor-cache"
    cache = base / f"gpu-report-{stamp}-{os.getpid()}"
    try:
        cache.mkdir(parents=True)
    except OSError as exc:
        raise BadInput(
            f"TORCHINDUCTOR_CACHE_DIR={root}: cannot create a folder in it ({exc.strerror})"
        ) from None
    return cache, root is not None


def remove_compile_cache(cache: Path, inside_env: bool) -> None:
    """The folder this run made; and, in the report folder, the then empty folder around it."""
    shutil.rmtree(cache, ignore_errors=True)
    if not inside_env:
        with contextlib.suppress(OSError):  # not empty: something else is in it, keep it
            cache.parent.rmdir()


def run_part(name: str, runner: parts.Runner) -> dict[str, Any]:
    before = set(runner.out.glob("logs/*.log"))
    begin = time.monotonic()
    status, reason, figures = "ok", None, {}
    try:
        figures = parts.PARTS[name](runner)
    except parts.Skipped as exc:
        status, reason = "skipped", str(exc)
    except parts.Failed as exc:
        status, reason = "failed", str(exc)
    except Exception as exc:  # a bug in the report itself: keep going, keep the traceback
        status, reason = "failed", f"the report's own code raised {type(exc).__name__}: {exc}"
        runner.log(f"{name}-traceback").write_text(traceback.format_exc())
    new_logs = set(runner.out.glob("logs/*.log")) - before
    logs = sorted(str(path.relative_to(runner.out)) for path in new_logs)
    return {
        "status": status,
        "seconds": round(time.monotonic() - begin, 2),
        "reason": reason,
        "figures": figures,
        "logs": logs,
    }


def say(message: str) -> None:
    print(f"gpu-report: {message}", file=sys.stderr, flush=True)


class Interrupted(BaseException):
    """SIGTERM (from `timeout`, a scheduler, `docker stop`): stop, kill the children (the
    `finally` blocks around them do), and write what was measured. A BaseException, so that a
    part's own `except Exception` cannot swallow it."""


def stop_on_sigterm() -> None:
    def interrupt(signum: int, _frame: object) -> None:
        raise Interrupted(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, interrupt)


@dataclass
class Session:
    """One run of the report: its settings, what it found, and where it writes."""

    args: argparse.Namespace
    argv: list[str]
    folder: Path
    environment: dict[str, Any]
    started: datetime
    begin: float = field(default_factory=time.monotonic)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)

    def write(self, complete: bool) -> dict[str, Any]:
        """report.json and report.md as they stand (after every part, so a report killed
        outright still leaves what it measured)."""
        report = build_report(self, complete)
        (self.folder / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
        (self.folder / "report.md").write_text(render.render(report))
        return report


def run_parts(session: Session, runner: parts.Runner, wanted: list[str]) -> None:
    for number, name in enumerate(wanted, 1):
        say(f"[{number}/{len(wanted)}] {name}: {parts.PART_HELP[name]}")
        begin = time.monotonic()
        try:
            result = run_part(name, runner)
        except (Interrupted, KeyboardInterrupt) as exc:
            session.results[name] = {
                "status": "failed",
                "seconds": round(time.monotonic() - begin, 2),
                "reason": f"interrupted ({exc or 'Ctrl-C'}): the parts after it did not run",
                "figures": {},
                "logs": [],
            }
            say(f"[{number}/{len(wanted)}] {name}: interrupted")
            return
        session.results[name] = result
        note = f" ({result['reason']})" if result["reason"] else ""
        say(f"[{number}/{len(wanted)}] {name}: {result['status']} {result['seconds']:.0f} s{note}")
        session.write(complete=False)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    started = datetime.now().astimezone()
    stamp = started.strftime("%Y%m%d-%H%M%S")
    try:
        wanted = selected_parts(args.only)
        folder = prepare_folder(args.out, stamp)
        disk = checkpoint_disk(args.checkpoint_dir, folder)
        environ = dict(os.environ)
        environment = machine.describe(environ)
        if not args.cpu and not environment["gpus"]:
            raise BadInput(
                f"no GPU visible ({environment['nvml_error'] or 'NVML lists none'}); on a machine "
                "without one run `make gpu-report ARGS=--cpu`"
            )
        cache, cache_from_env = fresh_compile_cache(folder, stamp)
    except BadInput as exc:
        say(str(exc))
        return EXIT_BAD_INPUT
    environment["compile_cache"] = {"folder": str(cache), "inside_TORCHINDUCTOR_CACHE_DIR":
                                    cache_from_env, "kept": args.keep_cache}  # fmt: skip
    session = Session(args, argv, folder, environment, started)
    runner = parts.Runner(
        out=folder, sizes=parts.CPU_SIZES if args.cpu else parts.GPU_SIZES,
        env=parts.child_env(environ), compile_cache=cache, gpu_count=len(environment["gpus"]),
        checkpoint_disk=disk,
    )  # fmt: skip
    stop_on_sigterm()
    try:
        run_parts(session, runner, wanted)
    finally:
        if not args.keep_cache:
            remove_compile_cache(cache, inside_env=cache_from_env)
    report = session.write(complete=True)
    print((folder / "report.md").read_text())
    say(f"report: {folder / 'report.md'} and report.json; exit {report['exit_code']}")
    return int(report["exit_code"])


def build_report(session: Session, complete: bool) -> dict[str, Any]:
    gpus = session.environment["gpus"]
    elapsed = time.monotonic() - session.begin
    ctx = targets.Context(
        mode="cpu" if session.args.cpu else "gpu",
        gpu_name=gpus[0]["name"] if gpus else None,
        peak=session.environment["peak"],
        elapsed_s=elapsed if complete else None,
    )
    results = session.results
    rows = targets.evaluate(ctx, results)
    failed = any(part["status"] == "failed" for part in results.values()) or any(
        row.verdict is targets.Verdict.FAIL for row in rows
    )
    return {
        "schema": SCHEMA,
        "mode": ctx.mode,
        "complete": complete,
        "command": "python -m benchmarks.gpu_report " + shlex.join(session.argv),
        "started": session.started.isoformat(timespec="seconds"),
        "elapsed_s": round(elapsed, 1),
        "exit_code": EXIT_FAILED if failed else EXIT_OK,
        "summary": targets.summary(rows),
        "environment": session.environment,
        "targets": [row.to_dict() for row in rows],
        "parts": results,
    }
