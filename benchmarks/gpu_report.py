"""The GPU report: one command that proves a CUDA machine (`make gpu-report`, docs/gpu-report.md).

    python -m benchmarks.gpu_report [--cpu] [--out DIR] [--only PART,...] [--checkpoint-dir DIR]

It does no check of its own: it runs what the project already has, as children with deadlines
(`torchrig.children`), and sets their figures beside the targets:
- verify: `torchrig verify --json`, --quick and full, timed: bf16 matmul TFLOP/s, memory triad
  GB/s, one-GPU NCCL all-reduce algbw, every verdict;
- compile: torch.compile's first step from a cold cache, then again from the same cache;
- training: the example's defaults against a naive fp32 loop, DDP with one process against none
  (benchmarks/train_throughput.py);
- resume: the training example (FSDP2, sharded checkpoints) killed after its first checkpoint and
  resumed, against the same run left alone: the loss curves and the final weights;
- checkpoint: CheckpointManager against raw disk I/O (benchmarks/checkpoint_io.py);
- tests: `pytest -m gpu tests/gpu`, among them NVML's verdicts against nvidia-smi's.
report.json and report.md land in one folder with every child's log; the markdown is printed too.
`--cpu` runs it all on a CPU with tiny sizes (CI keeps it working so); figures are then shown, not
judged. Exit 0, 1 when a part failed or a target was missed, 2 on bad input or, without --cpu, no
GPU. SIGTERM stops it: the running child is killed and the report written.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import re
import shlex
import shutil
import signal
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from torchrig import children
from torchrig.facts import nvml

from testbed import committed, image_hook, traced_train

REPO = Path(__file__).resolve().parents[1]
SCHEMA = "torchrig.gpu_report/2"
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2

# Published runs on the same cards (mamf-finder's bf16 matmul; a STREAM triad), the figures a
# healthy card reaches in practice; the targets ask for 95 % of them.
PUBLISHED_BF16_TFLOPS = {"H100": 794.5, "H200": 794.5}
PUBLISHED_TRIAD_GBPS = {"H100": 2970.0, "H200": 4150.0}
OF_PUBLISHED = 0.95
VERIFY_QUICK_MAX_S, VERIFY_FULL_MAX_S = 5.0, 60.0
DEFAULTS_MIN_SPEEDUP = 2.5
DDP_MAX_OVERHEAD_PERCENT = 5.0
SAVE_MIN_FRACTION_OF_RAW = 0.8
# Without deterministic algorithms (the example's choice on GPUs) a resumed curve may drift a
# little: atomics in the backward pass sum in another order.
LOSS_RTOL_NONDETERMINISTIC = 0.02
VERDICTS = ("PASS", "FAIL", "INFO", "SKIP")
NVML_TEST = "test_nvml_verdicts_match_nvidia_smi"
LOSS_LINE = re.compile(r"^step\s+(\d+) \| loss (\S+) \|", re.MULTILINE)
RESUMED_LINE = re.compile(r"resuming from step (\d+)")


@dataclass(frozen=True)
class Sizes:
    """How big each part's work is: a real workload on a GPU, the smallest that runs on a CPU."""

    device: str
    model: str
    batch_size: int
    image_size: int
    steps: int
    warmup: int
    resume: str  # the example's arguments for the kill-and-resume runs
    step_delay: float  # slows the run to be killed, so the kill lands mid-run
    nproc: int | None  # None: one process per GPU
    checkpoint_mb: int
    timeout: float  # per child


RESUME_COMMON = "--fsdp --log-every 1 --seed 7"
GPU = Sizes(
    "cuda", "resnet50", 128, 224, 50, 10,
    "--device cuda --model resnet18 --image-size 64 --num-classes 100 --synthetic-size 8192 "
    f"--batch-size 64 --steps 30 --warmup-steps 3 --checkpoint-every 10 {RESUME_COMMON}",
    0.5, None, 1000, 480,
)  # fmt: skip
CPU = Sizes(
    "cpu", "tiny", 16, 32, 5, 2,
    "--device cpu --model tiny --image-size 8 --num-classes 4 --synthetic-size 96 "
    f"--batch-size 4 --steps 12 --warmup-steps 2 --checkpoint-every 4 {RESUME_COMMON}",
    0.6, 2, 20, 600,
)  # fmt: skip


class Failed(Exception):
    """A part could not do its job; the message says why."""


class Interrupted(BaseException):
    """SIGTERM: a BaseException, so that no `except Exception` of a part swallows it."""


@dataclass
class Run:
    """One report: its settings, where it writes, and how it runs a child."""

    out: Path
    sizes: Sizes
    env: dict[str, str]
    cache: Path  # a fresh TORCHINDUCTOR_CACHE_DIR for the compiling parts
    gpus: int
    disk: Path

    @property
    def cpu(self) -> bool:
        return self.sizes.device == "cpu"

    def child(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Any:
        """Run `argv` to its end or the deadline; its command, status and output in a log."""
        done = children.run(argv, self.sizes.timeout, env or self.env, cwd=REPO)
        write_log(self.out / "logs" / f"{name}.log", argv, done)
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


def write_log(path: Path, argv: list[str], done: children.Outcome) -> None:
    status = "killed at the deadline" if done.timed_out else f"exit {done.returncode}"
    path.write_text(
        f"$ {shlex.join(argv)}\n# {status} after {done.seconds:.1f} s\n"
        f"--- stdout ---\n{done.stdout}\n--- stderr ---\n{done.stderr}"
    )


def why(done: children.Outcome) -> str:
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    last = lines[-1][:300] if lines else "no output"
    return f"{'killed at its deadline' if done.timed_out else f'exit {done.returncode}'}: {last}"


# --- the parts ---------------------------------------------------------------------------


def part_verify(r: Run) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for flavour in ("quick", "full"):
        argv = [sys.executable, "-m", "torchrig", "verify", "--json"]
        argv += (["--quick"] if flavour == "quick" else []) + (["--cpu"] if r.cpu else [])
        done = r.child(f"verify-{flavour}", argv)
        try:
            document = json.loads(done.stdout)
        except ValueError:
            raise Failed(f"verify {flavour} printed no JSON report, {why(done)}") from None
        (r.out / f"verify-{flavour}.json").write_text(done.stdout)
        if done.returncode not in (0, 1):  # 1: a check FAILed, which is a verdict
            raise Failed(f"verify {flavour}: {why(done)}")
        checks = document.get("checks", [])
        figures[flavour] = {
            "seconds": round(done.seconds, 2),
            "summary": " ".join(f"{n} {v}" for n, v in (document.get("summary") or {}).items()),
            "failed": [
                f"{c['section']}/{c['name']}: {c['summary']}"
                for c in checks
                if c.get("verdict") == "FAIL"
            ],
        }
    figures.update(probe_figures(json.loads((r.out / "verify-full.json").read_text())))
    return figures


def probe_figures(document: dict[str, Any]) -> dict[str, Any]:
    """Per GPU the bf16 matmul TFLOP/s and triad GB/s, each with its fraction of the spec sheet
    (`torchrig/verify/peaks.py`, where the card is in it), and the all-reduce, from verify's
    JSON."""
    matmul, memory, allreduce = {}, {}, None
    for check in document.get("checks", []):
        name, data = check["name"], check.get("data") or {}
        if name.endswith(" matmul") and "tflops" in data:
            of_spec = (data.get("fraction_of_peak") or {}).get("bf16")
            matmul[name.removesuffix(" matmul")] = [data["tflops"].get("bf16"), of_spec]
        elif name.endswith(" memory") and "gbps" in data:
            memory[name.removesuffix(" memory")] = [data["gbps"], data.get("fraction_of_peak")]
        elif check["section"] == "collectives":
            sweep = data.get("sweep") or []
            allreduce = {
                "verdict": check["verdict"],
                "world": data.get("world"),
                "correct": bool(sweep) and all(entry.get("correct") for entry in sweep),
                "best_algbw_gbps": max((e.get("algbw_gbps", 0.0) for e in sweep), default=None),
            }
    return {"matmul_tflops": matmul, "triad_gbps": memory, "allreduce": allreduce}


def throughput_args(s: Sizes) -> list[str]:
    return ["--device", s.device, "--model", s.model, "--batch-size", str(s.batch_size),
            "--image-size", str(s.image_size), "--json"]  # fmt: skip


def part_compile(r: Run) -> dict[str, Any]:
    argv = [sys.executable, "benchmarks/train_throughput.py", "compile",
            *throughput_args(r.sizes), "--steps", "3"]  # fmt: skip
    return {run: r.json_of(f"compile-{run}", argv, r.compiling_env()) for run in ("cold", "warm")}


def part_training(r: Run) -> dict[str, Any]:
    s = r.sizes
    argv = [sys.executable, "benchmarks/train_throughput.py", "gpu", *throughput_args(s),
            "--steps", str(s.steps), "--warmup", str(s.warmup), "--no-example"]  # fmt: skip
    # The compile part ran first, so the "defaults" loop starts from a warm cache.
    return r.json_of("training", argv, r.compiling_env())


def part_checkpoint(r: Run) -> dict[str, Any]:
    argv = [
        sys.executable,
        "benchmarks/checkpoint_io.py",
        "--dir",
        str(r.disk),
        "--mb",
        str(r.sizes.checkpoint_mb),
        "--repeats",
        "2",
        "--device",
        r.sizes.device,
        "--json",
    ]
    done = r.child("checkpoint", argv)
    try:
        return {**json.loads(done.stdout), "disk": str(r.disk)}
    except ValueError:
        raise Failed(f"checkpoint_io: {why(done)}") from None


def part_tests(r: Run) -> dict[str, Any]:
    junit = r.out / "gpu-tests.xml"
    argv = [sys.executable, "-m", "pytest", "-m", "gpu", "tests/gpu", "-p", "no:cacheprovider",
            f"--junitxml={junit}"]  # fmt: skip
    done = r.child("tests", argv)
    # 0: all passed, 1: some failed, 5: none collected; anything else is pytest itself failing.
    if done.returncode not in (0, 1, 5) or not junit.is_file():
        raise Failed(f"pytest: {why(done)}")
    return read_junit(junit.read_text())


def read_junit(text: str) -> dict[str, Any]:
    """Each test's outcome ("passed", "failed", "skipped: <why>") and the properties it recorded."""
    cases = {}
    for case in ET.fromstring(text).iter("testcase"):
        problem = case.find("failure") if case.find("failure") is not None else case.find("error")
        skipped = case.find("skipped")
        outcome = "failed" if problem is not None else "passed"
        if skipped is not None:
            outcome = f"skipped: {skipped.get('message') or 'no reason given'}"
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        cases[case.get("name", "")] = {"outcome": outcome, **properties}
    return {"cases": cases}


def part_resume(r: Run) -> dict[str, Any]:
    """Three runs of one command: left alone; killed (torchrun and every worker, as a crash)
    once its first checkpoint is on disk; the same command again, which resumes."""
    nproc = r.sizes.nproc or r.gpus
    work = r.out / "resume-checkpoints"
    shutil.rmtree(work, ignore_errors=True)
    env = r.compiling_env()
    if r.cpu:
        env["OMP_NUM_THREADS"] = "1"  # two ranks on few cores must not oversubscribe them

    def argv(folder: Path, *extra: str) -> list[str]:
        example = [*shlex.split(r.sizes.resume), "--checkpoint-dir", str(folder),
                   "--save-final", str(folder / "final.pt"), *extra]  # fmt: skip
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                str(nproc), *traced_train.command(committed.example(), example,
                                                  "testbed/traced_train.py")]  # fmt: skip

    whole, broken = work / "uninterrupted", work / "killed-and-resumed"
    try:
        first = r.child("resume-uninterrupted", argv(whole), env)
        if not first.ok:
            raise Failed(f"the uninterrupted run failed, {why(first)}")
        slowed = argv(broken, "--step-delay", f"{r.sizes.step_delay:g}")
        killed = kill_after_first_checkpoint(r, slowed, broken, env)
        again = r.child("resume-resumed", argv(broken), env)
        if not again.ok:
            raise Failed(f"the resumed run failed, {why(again)}")
        found = RESUMED_LINE.search(again.stdout + again.stderr)
        if found is None:
            raise Failed("the second run did not resume (no 'resuming from step' line)")
        start = int(found.group(1))
        curve = {s: v for s, v in losses(killed).items() if s <= start}
        curve.update({s: v for s, v in losses(again.stdout + again.stderr).items() if s > start})
        reference = losses(first.stdout + first.stderr)
        steps = [step for step in broken.glob("step_*") if step.is_dir()]
        return {
            "nproc": nproc,
            "deterministic": r.cpu,  # the example turns deterministic algorithms on on CPUs only
            "steps": len(reference),
            "resumed_from": start,
            "shard_files": sum(len(list(step.glob("*.distcp"))) for step in steps),
            **curve_difference(reference, curve),
            **compare_weights(whole / "final.pt", broken / "final.pt"),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)  # checkpoints and weights: the figures stay


def kill_after_first_checkpoint(r: Run, argv: list[str], folder: Path, env: dict) -> str:
    child = children.start(argv, env, cwd=REPO, merged=True)
    deadline = time.monotonic() + r.sizes.timeout
    try:
        while not (folder / "latest").is_file() and child.process.poll() is None:
            if time.monotonic() > deadline:
                break
            time.sleep(children.POLL_S)
        landed = (folder / "latest").is_file()
    finally:
        children.kill_and_reap([child])
    done = children.outcome_of(child)
    write_log(r.out / "logs" / "resume-killed.log", argv, done)
    if not landed:
        raise Failed(f"the run to be killed ended or stalled before its checkpoint: {why(done)}")
    if (folder / "final.pt").exists():
        raise Failed("the run finished before it could be killed (raise its step delay)")
    return done.stdout


def losses(output: str) -> dict[int, float]:
    """Step -> mean loss, from the example's throughput lines."""
    return {int(step): float(loss) for step, loss in LOSS_LINE.findall(output)}


def curve_difference(reference: dict[int, float], other: dict[int, float]) -> dict[str, Any]:
    """The largest relative difference over the steps both curves have (inf: one diverged)."""
    steps = sorted(set(reference) & set(other))
    worst = 0.0
    for step in steps:
        a, b = reference[step], other[step]
        if a != b:
            worst = max(worst, abs(a - b) / max(abs(a), 1e-12))
    return {"loss_steps_compared": len(steps), "max_loss_rel_diff": worst}


def compare_weights(first: Path, second: Path) -> dict[str, Any]:
    import torch

    a = torch.load(first, map_location="cpu", weights_only=True)
    b = torch.load(second, map_location="cpu", weights_only=True)
    different = sorted(a.keys() ^ b.keys()) + [
        name for name in a.keys() & b.keys() if not torch.equal(a[name], b[name])
    ]
    return {"weights_bitwise_equal": not different, "tensors_different": len(different)}


# In running order: verify before anything loads the GPU, compile before training (which then
# starts from the warm cache), the tests last (they run verify again and take longest).
PARTS: dict[str, Callable[[Run], dict[str, Any]]] = {
    "verify": part_verify,
    "compile": part_compile,
    "training": part_training,
    "resume": part_resume,
    "checkpoint": part_checkpoint,
    "tests": part_tests,
}


# --- the targets --------------------------------------------------------------------------


@dataclass(frozen=True)
class Judge:
    """How a row is judged: correctness always; performance only on a GPU."""

    cpu: bool

    def correct(self, ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    def fast(self, ok: bool) -> str:
        return "INFO" if self.cpu else ("PASS" if ok else "FAIL")


def targets(parts: dict[str, dict[str, Any]], gpu_name: str | None, cpu: bool) -> list[dict]:
    """One row per target: (part, name, measured, goal, verdict); a part that did not finish
    gives one row saying so."""
    judge, rows = Judge(cpu), []
    for name, rows_of in TARGETS.items():
        part = parts.get(name)
        if part is None:
            continue
        if part["status"] != "ok":
            rows.append(row(name, "the part", "-", "runs", "FAIL", part["reason"]))
            continue
        rows.extend(rows_of(part["figures"], judge, gpu_name))
    return rows


def row(part: str, name: str, measured: str, goal: str, verdict: str, note: str = "") -> dict:
    return {"part": part, "name": name, "measured": measured, "goal": goal, "verdict": verdict,
            "note": note}  # fmt: skip


def published(table: dict[str, float], gpu_name: str | None) -> float | None:
    return next((value for key, value in table.items() if key in (gpu_name or "")), None)


def verify_rows(f: dict[str, Any], judge: Judge, gpu_name: str | None) -> list[dict]:
    quick, full = f["quick"], f["full"]
    rows = [
        row("verify", "`torchrig verify` verdicts", f"quick {quick['summary']}, full "
            f"{full['summary']}", "no FAIL", judge.correct(not quick["failed"] + full["failed"]),
            "; ".join(quick["failed"] + full["failed"])),
        row("verify", "`torchrig verify --quick` wall time", f"{quick['seconds']:.1f} s",
            f"<= {VERIFY_QUICK_MAX_S:g} s", judge.fast(quick["seconds"] <= VERIFY_QUICK_MAX_S)),
        row("verify", "`torchrig verify` wall time", f"{full['seconds']:.1f} s",
            f"<= {VERIFY_FULL_MAX_S:g} s", judge.fast(full["seconds"] <= VERIFY_FULL_MAX_S)),
    ]  # fmt: skip
    figures = (
        ("bf16 matmul", PUBLISHED_BF16_TFLOPS, "TFLOP/s", True),
        ("memory triad", PUBLISHED_TRIAD_GBPS, "GB/s", False),
    )
    for figure, table, unit, matmul in figures:
        reference = published(table, gpu_name)
        source = f["matmul_tflops"] if matmul else f["triad_gbps"]
        goal = f">= {OF_PUBLISHED:.0%} of {reference:g}" if reference else "reported"
        for gpu, (value, of_spec) in source.items():
            if value is None:
                continue
            ok = reference is not None and value >= OF_PUBLISHED * reference
            verdict = judge.fast(ok) if reference else "INFO"
            note = f"{of_spec:.0%} of the spec sheet" if of_spec else "no spec sheet figure"
            rows.append(
                row("verify", f"{gpu} {figure}", f"{value:.4g} {unit}", goal, verdict, note)
            )
    allreduce = f["allreduce"]
    if allreduce is None:
        return [*rows, row("verify", "all-reduce sums", "-", "correct", "FAIL", "no result")]
    best = allreduce["best_algbw_gbps"]
    return [
        *rows,
        row("verify", "all-reduce sums", f"{allreduce['world']} rank(s), {allreduce['verdict']}",
            "correct", judge.correct(allreduce["correct"])),
        row("verify", "all-reduce algbw", "-" if best is None else f"{best:.1f} GB/s",
            "reported", "INFO"),
    ]  # fmt: skip


def compile_rows(f: dict[str, Any], judge: Judge, _gpu: str | None) -> list[dict]:
    cold, warm = f["cold"], f["warm"]
    hits = warm["cache"].get("fxgraph_cache_hit", 0)
    misses = warm["cache"].get("fxgraph_cache_miss", 0)
    return [
        row("compile", "torch.compile first step, cold cache", f"{cold['first_step_s']:.1f} s",
            "reported", "INFO"),
        row("compile", "torch.compile first step, second run", f"{warm['first_step_s']:.1f} s",
            "reported", "INFO"),
        row("compile", "compile cache on the second run", f"FX graph cache {hits} hit(s), "
            f"{misses} miss(es)", "hits, no misses", judge.correct(hits > 0 and misses == 0)),
    ]  # fmt: skip


def training_rows(f: dict[str, Any], judge: Judge, _gpu: str | None) -> list[dict]:
    speedup, overhead = f["speedup_defaults_vs_naive"], f["ddp_overhead_percent"]
    return [
        row("training", "example defaults vs naive fp32 eager", f"{speedup:.2f}x "
            f"({f['images_per_s_defaults']:.0f} vs {f['images_per_s_naive_fp32_eager']:.0f} "
            "images/s)", f">= {DEFAULTS_MIN_SPEEDUP:g}x",
            judge.fast(speedup >= DEFAULTS_MIN_SPEEDUP)),
        row("training", "DDP, one process, vs the plain model", f"{overhead:+.1f} %",
            f"<= {DDP_MAX_OVERHEAD_PERCENT:g} % slower",
            judge.fast(overhead <= DDP_MAX_OVERHEAD_PERCENT)),
    ]  # fmt: skip


def resume_rows(f: dict[str, Any], judge: Judge, _gpu: str | None) -> list[dict]:
    exact = f["deterministic"]
    tolerance = 0.0 if exact else LOSS_RTOL_NONDETERMINISTIC
    mode = "deterministic algorithms " + ("on" if exact else "off")
    same = f["loss_steps_compared"] == f["steps"] and f["max_loss_rel_diff"] <= tolerance
    equal = f["weights_bitwise_equal"]
    return [
        row("resume", "FSDP2 sharded checkpoints on disk", f"{f['shard_files']} shard file(s)",
            "some", judge.correct(f["shard_files"] > 0)),
        row("resume", "loss curve after kill and resume", f"resumed from step "
            f"{f['resumed_from']}; {f['loss_steps_compared']}/{f['steps']} steps, max "
            f"difference {f['max_loss_rel_diff']:.2%}", f"within {tolerance:.0%} ({mode})",
            judge.correct(same)),
        row("resume", "weights after kill and resume", "bitwise equal" if equal else
            f"{f['tensors_different']} tensor(s) differ", f"bitwise equal where deterministic "
            f"({mode})", judge.correct(equal) if exact else ("PASS" if equal else "INFO")),
    ]  # fmt: skip


def checkpoint_rows(f: dict[str, Any], judge: Judge, _gpu: str | None) -> list[dict]:
    return [
        row("checkpoint", "checkpoint save vs raw disk write", f"{f['save_vs_raw']:.2f}",
            f">= {SAVE_MIN_FRACTION_OF_RAW:g} of raw", judge.fast(f["save_vs_raw"] >=
            SAVE_MIN_FRACTION_OF_RAW)),
        row("checkpoint", "checkpoint load vs raw disk read", f"{f['load_vs_raw']:.2f}",
            "reported", "INFO"),
    ]  # fmt: skip


def tests_rows(f: dict[str, Any], judge: Judge, _gpu: str | None) -> list[dict]:
    cases = f["cases"]
    outcomes = [case["outcome"] for case in cases.values()]
    failed = [name for name, case in cases.items() if case["outcome"] == "failed"]
    skipped = sorted({o.removeprefix("skipped: ") for o in outcomes if o.startswith("skipped")})
    skips = sum(outcome.startswith("skipped") for outcome in outcomes)
    counts = f"{outcomes.count('passed')} passed, {len(failed)} failed, {skips} skipped"
    verdict = "FAIL" if failed else ("SKIP" if skipped and not outcomes.count("passed") else "PASS")
    nvml_case = cases.get(NVML_TEST, {"outcome": "not run"})
    nvml_verdict = {"passed": "PASS", "failed": "FAIL"}.get(nvml_case["outcome"], "SKIP")
    return [
        row("tests", "`pytest -m gpu tests/gpu`", counts, "all pass", verdict,
            "; ".join(failed or skipped)),
        row("tests", "NVML verdicts vs nvidia-smi", nvml_case.get("compared", "-"),
            "the same facts and verdicts", nvml_verdict, nvml_case["outcome"]),
    ]  # fmt: skip


TARGETS: dict[str, Callable[[dict[str, Any], Judge, str | None], list[dict]]] = {
    "verify": verify_rows,
    "compile": compile_rows,
    "training": training_rows,
    "resume": resume_rows,
    "checkpoint": checkpoint_rows,
    "tests": tests_rows,
}


# --- the report ---------------------------------------------------------------------------


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


def render(report: dict[str, Any]) -> str:
    m = report["environment"]
    lines = [
        f"# GPU report ({report['mode']})", "",
        f"`{report['command']}`, started {report['started']}, {report['elapsed_s']:.0f} s; "
        f"exit {report['exit_code']}; "
        + ", ".join(f"{k} {v}" for k, v in report["summary"].items()),
        "", "## Machine", "",
        f"{m['host']}: Python {m['python']}, {m['cpus']} CPUs, driver {m['driver'] or '-'}, GPUs: "
        f"{', '.join(m['gpus']) or 'none'}; "
        + ", ".join(f"{k} {v}" for k, v in m["packages"].items() if v),
        "", "## Targets", "", "| part | target | measured | goal | verdict | note |",
        "| --- | --- | --- | --- | --- | --- |",
        *(f"| {t['part']} | {t['name']} | {t['measured']} | {t['goal']} | {t['verdict']} | "
          f"{t['note'].replace('|', '/')} |" for t in report["targets"]),
        "", "## Parts", "", "| part | status | seconds | logs |", "| --- | --- | --- | --- |",
        *(f"| {name} | {p['status']}{': ' + p['reason'] if p['reason'] else ''} | "
          f"{p['seconds']:.0f} | {', '.join(p['logs'])} |" for name, p in report["parts"].items()),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def say(message: str) -> None:
    print(f"gpu-report: {message}", file=sys.stderr, flush=True)


def run_part(name: str, run: Run) -> dict[str, Any]:
    before = set((run.out / "logs").iterdir())
    begin = time.monotonic()
    status, reason, figures = "ok", None, {}
    try:
        figures = PARTS[name](run)
    except Failed as exc:
        status, reason = "failed", str(exc)
    except (Interrupted, KeyboardInterrupt) as exc:
        status, reason = (
            "failed",
            f"interrupted ({exc or 'Ctrl-C'}): the later parts did not run",
        )
    except Exception as exc:  # a bug in the report itself: keep going
        status, reason = "failed", f"the report's own code raised {type(exc).__name__}: {exc}"
    logs = sorted(str(p.relative_to(run.out)) for p in set((run.out / "logs").iterdir()) - before)
    return {"status": status, "seconds": round(time.monotonic() - begin, 2), "reason": reason,
            "figures": figures, "logs": logs}  # fmt: skip


def write(out: Path, argv: list[str], env: dict, parts: dict, started: datetime, cpu: bool,
          begin: float) -> dict[str, Any]:  # fmt: skip
    rows = targets(parts, env["gpus"][0] if env["gpus"] else None, cpu)
    failed = any(r["verdict"] == "FAIL" for r in rows)
    report = {
        "schema": SCHEMA, "mode": "cpu" if cpu else "gpu",
        "command": "python -m benchmarks.gpu_report " + shlex.join(argv),
        "started": started.isoformat(timespec="seconds"),
        "elapsed_s": round(time.monotonic() - begin, 1),
        "exit_code": EXIT_FAILED if failed else EXIT_OK,
        "summary": {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS},
        "environment": env, "targets": rows, "parts": parts,
    }  # fmt: skip
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (out / "report.md").write_text(render(report))
    return report


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


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What every part's children run with: this checkout's package, and the image's rank-exit
    hook, so that a torchrun worker ends as it does in the image (without it a rank can abort
    in Python's teardown after its training, by chance, and fail the part)."""
    path = os.pathsep.join(filter(None, [str(REPO / "scripts"), environ.get("PYTHONPATH")]))
    env = {**environ, "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}
    return image_hook.with_image_hook(env)


def interrupt(signum: int, _frame: object) -> None:
    raise Interrupted(signal.Signals(signum).name)


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
        return EXIT_BAD_INPUT
    env["compile_cache"] = {"folder": str(cache), "kept": args.keep_cache}
    run = Run(out, CPU if args.cpu else GPU, child_environment(os.environ), cache,
              len(env["gpus"]), disk)  # fmt: skip
    signal.signal(signal.SIGTERM, interrupt)
    parts: dict[str, dict[str, Any]] = {}
    try:
        for number, name in enumerate(wanted, 1):
            say(f"[{number}/{len(wanted)}] {name}")
            parts[name] = run_part(name, run)
            say(f"[{number}/{len(wanted)}] {name}: {parts[name]['status']} "
                f"{parts[name]['seconds']:.0f} s {parts[name]['reason'] or ''}")  # fmt: skip
            write(out, argv, env, parts, started, args.cpu, begin)
            if (parts[name]["reason"] or "").startswith("interrupted"):
                break
    finally:
        if not args.keep_cache:
            shutil.rmtree(cache, ignore_errors=True)
    report = write(out, argv, env, parts, started, args.cpu, begin)
    print((out / "report.md").read_text())
    say(f"report: {out / 'report.md'} and report.json; exit {report['exit_code']}")
    return int(report["exit_code"])


if __name__ == "__main__":
    sys.exit(main())
