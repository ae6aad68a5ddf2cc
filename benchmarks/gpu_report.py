"""The GPU report: one command that proves a CUDA machine (`make gpu-report`, docs/gpu-report.md).

    python -m benchmarks.gpu_report [--cpu] [--out DIR] [--only PART,...] [--checkpoint-dir DIR]

It does no check of its own: it runs what the project already has, as children within each
part's time budget and the report's (7 minutes on one H100 in all), and sets their figures beside
the targets:
- verify: `torchrig verify --json`, --quick and full, timed, every verdict, the one-GPU NCCL
  all-reduce; verify's bf16/fp16 matmul and triad method against a plain torch loop in one
  process (benchmarks/verify_figures.py), the published runs beside them;
- compile: torch.compile's first step from a cold cache, then again from the same cache;
- training: the example's defaults against a naive fp32 loop, DDP with one process against none
  (benchmarks/train_throughput.py);
- resume: the training example (FSDP2, sharded checkpoints) killed after its first checkpoint and
  resumed, against the same run left alone: the loss curves and the final weights;
- checkpoint: CheckpointManager against raw disk I/O (benchmarks/checkpoint_io.py);
- tests: `pytest -m gpu tests/gpu`, among them NVML's verdicts against nvidia-smi's;
- best: plain PyTorch at its best for the training part's model and batch
  (`torch.compile(mode="max-autotune")`, benchmarks/plain_best.py), the defaults against it.
report.json and report.md land in one folder with every child's log, written as the child runs;
the console has a line as each child starts and ends; the markdown is printed at the end.
`--cpu` runs it all on a CPU with tiny sizes (CI keeps it working so); figures are then shown, not
judged. Exit 0, 1 when a part failed or a target was missed, 2 on bad input or, without --cpu, no
GPU. SIGTERM stops it: the running child is killed and the report written.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
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
# healthy card reaches in practice: shown beside verify's, not judged (the plain loop is).
PUBLISHED_BF16_TFLOPS = {"H100": 794.5, "H200": 794.5}
PUBLISHED_TRIAD_GBPS = {"H100": 2970.0, "H200": 4150.0}
# verify's method against a plain torch loop in the same process (benchmarks/verify_figures.py).
OF_PLAIN_LOOP = 0.98
# Hopper's tensor cores run fp16 and bf16 at one rate: more apart is the method, not the card.
SAME_FP16_BF16_RATE = ("H100", "H200")
FP16_BF16_APART = 0.03
VERIFY_QUICK_MAX_S, VERIFY_FULL_MAX_S = 3.0, 60.0
DEFAULTS_MIN_SPEEDUP = 2.5
DDP_MAX_OVERHEAD_PERCENT = 3.0
SAVE_MIN_FRACTION_OF_RAW = 0.9
# Without deterministic algorithms (the example's choice on GPUs) a resumed curve may drift a
# little: atomics in the backward pass sum in another order.
LOSS_RTOL_NONDETERMINISTIC = 0.02
VERDICTS = ("PASS", "FAIL", "INFO", "SKIP")
# Parts whose figures are shown, never judged: one that does not finish is INFO, not FAIL (a cold
# max-autotune compile may not fit the time left).
SHOWN_ONLY = ("best",)
NVML_TEST = "test_nvml_verdicts_match_nvidia_smi"
LOSS_LINE = re.compile(r"^step\s+(\d+) \| loss (\S+) \|", re.MULTILINE)
RESUMED_LINE = re.compile(r"resuming from step (\d+)")


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
    resume: str  # the example's arguments for the kill-and-resume runs
    step_delay: float  # slows the run to be killed, so the kill lands mid-run
    nproc: int | None  # None: one process per GPU
    checkpoint_mb: int
    budgets: dict[str, float]  # seconds per part; a part missing here gets what is left
    total_s: float  # the whole report's: a part never runs past it


RESUME_COMMON = "--fsdp --log-every 1 --seed 7"
# One H100 gives the report 7 minutes (one 10-minute call, with room to install and copy): 410 s
# for the parts, the rest for writing and exiting. Expected there, from the first run: verify
# 75 s, compile 95, training 45, resume 100, checkpoint 30, tests 50; "best" gets what is left
# (a cold max-autotune compile rarely fits; a kept TORCHINDUCTOR_CACHE_DIR makes it warm).
GPU_BUDGETS = {"verify": 110, "compile": 120, "training": 80, "resume": 120, "checkpoint": 45,
               "tests": 75}  # fmt: skip
GPU = Sizes(
    "cuda", "resnet50", 128, 224, 50, 10,
    "--device cuda --model resnet18 --image-size 64 --num-classes 100 --synthetic-size 8192 "
    f"--batch-size 64 --steps 30 --warmup-steps 3 --checkpoint-every 10 {RESUME_COMMON}",
    0.5, None, 1000, GPU_BUDGETS, 410,
)  # fmt: skip
# A CPU shared with others: generous, the parts' own figures are only shown.
CPU = Sizes(
    "cpu", "tiny", 16, 32, 5, 2,
    "--device cpu --model tiny --image-size 8 --num-classes 4 --synthetic-size 96 "
    f"--batch-size 4 --steps 12 --warmup-steps 2 --checkpoint-every 4 {RESUME_COMMON}",
    0.6, 2, 20, dict.fromkeys(GPU_BUDGETS, 1200), math.inf,
)  # fmt: skip
MIN_PART_S = 10  # a part with less than this left is not started


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
    ) -> children.Outcome:
        """Run `argv` until it ends, `stop_when()` holds or the part's deadline passes (then it
        is killed); its output lands in logs/<name>.log as it comes, and the console gets a line
        when it starts and one when it ends."""
        log = self.out / "logs" / f"{name}.log"
        seconds = max(1.0, self.deadline - time.monotonic())
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
    status = status_of(done)
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
    figures["allreduce"] = allreduce_figures(json.loads((r.out / "verify-full.json").read_text()))
    # verify's matmul and triad method beside a plain torch loop, in one process.
    argv = [sys.executable, "benchmarks/verify_figures.py", "--device", r.sizes.device, "--json"]
    figures["figures"] = r.json_of("verify-figures", argv)
    return figures


def allreduce_figures(document: dict[str, Any]) -> dict[str, Any] | None:
    """The one-GPU NCCL (or gloo) all-reduce from verify's JSON: sums right, best algbw."""
    for check in document.get("checks", []):
        if check["section"] == "collectives":
            data = check.get("data") or {}
            sweep = data.get("sweep") or []
            return {
                "verdict": check["verdict"],
                "world": data.get("world"),
                "correct": bool(sweep) and all(entry.get("correct") for entry in sweep),
                "best_algbw_gbps": max((e.get("algbw_gbps", 0.0) for e in sweep), default=None),
            }
    return None


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


def part_best(r: Run) -> dict[str, Any]:
    """The best this card gives for the training part's model and batch in plain PyTorch
    (benchmarks/plain_best.py). On a CPU, the default compile mode: the FX graph cache the
    compile part filled makes it quick there; max-autotune would take minutes."""
    s = r.sizes
    argv = [sys.executable, "benchmarks/plain_best.py", *throughput_args(s), "--steps",
            str(s.steps), "--warmup", str(s.warmup), "--mode",
            "default" if r.cpu else "max-autotune"]  # fmt: skip
    return r.json_of("best", argv, r.compiling_env())


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
    # The verify part's two runs, for tests/gpu/test_verify.py to check, not to run again.
    done = r.child("tests", argv, {**r.env, "TORCHRIG_VERIFY_DOCUMENTS": str(r.out)})
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
    done = r.child("resume-killed", argv, env, merged=True,
                   stop_when=lambda: (folder / "latest").is_file())  # fmt: skip
    if not (folder / "latest").is_file():
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
# starts from the warm cache), the tests after the parts they back up, and last the best plain
# PyTorch can do, which gets the time left (a cold max-autotune compile takes minutes).
PARTS: dict[str, Callable[[Run], dict[str, Any]]] = {
    "verify": part_verify,
    "compile": part_compile,
    "training": part_training,
    "resume": part_resume,
    "checkpoint": part_checkpoint,
    "tests": part_tests,
    "best": part_best,
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
            verdict = "INFO" if name in SHOWN_ONLY else "FAIL"
            rows.append(row(name, "the part", "-", "runs", verdict, part["reason"]))
            continue
        figures = part["figures"]
        if name == "best":  # set against the training part's defaults
            figures = {"best": figures, "training": parts.get("training", {}).get("figures")}
        rows.extend(rows_of(figures, judge, gpu_name))
    return rows


def row(part: str, name: str, measured: str, goal: str, verdict: str, note: str = "",
        published: str = "-") -> dict:  # fmt: skip
    """One target; `published`: what published runs on the same card reach, where known."""
    return {"part": part, "name": name, "measured": measured, "goal": goal,
            "published": published, "verdict": verdict, "note": note}  # fmt: skip


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
    rows += figure_rows(f["figures"], judge, gpu_name)
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


def figure_rows(f: dict[str, Any], judge: Judge, gpu_name: str | None) -> list[dict]:
    """verify's bf16 matmul and triad against a plain loop in the same process (the published
    runs beside them), and fp16 against bf16 where the tensor cores run both at one rate."""
    label, verify, plain = f["label"], f["verify"], f["plain"]
    rows = []
    for key, figure, unit, table in (
        ("bf16", "bf16 matmul", "TFLOP/s", PUBLISHED_BF16_TFLOPS),
        ("triad_gbps", "memory triad", "GB/s", PUBLISHED_TRIAD_GBPS),
    ):
        value, reference, anchor = verify[key], plain[key], published(table, gpu_name)
        rows.append(
            row("verify", f"{label} {figure}", f"{value:.4g} {unit}",
                f">= {OF_PLAIN_LOOP:.0%} of a plain loop's {reference:.4g}",
                judge.fast(value >= OF_PLAIN_LOOP * reference),
                f"{value / reference:.1%} of the plain loop",
                published=f"{anchor:g} ({value / anchor:.0%})" if anchor else "-")
        )  # fmt: skip
    if "fp16" in verify:
        bf16, fp16 = verify["bf16"], verify["fp16"]
        apart = abs(fp16 - bf16) / bf16
        same_rate = any(card in (gpu_name or "") for card in SAME_FP16_BF16_RATE)
        rows.append(
            row("verify", f"{label} fp16 vs bf16 matmul",
                f"fp16 {fp16:.4g}, bf16 {bf16:.4g} TFLOP/s ({apart:.1%} apart)",
                f"within {FP16_BF16_APART:.0%} on Hopper",
                judge.fast(apart <= FP16_BF16_APART) if same_rate else "INFO")
        )  # fmt: skip
    return rows


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


def best_rows(f: dict[str, Any], _judge: Judge, _gpu: str | None) -> list[dict]:
    """Shown, not judged: what the card can do, and how near the example's defaults come."""
    best = f["best"]
    rows = [
        row("best", f"plain PyTorch at its best, torch.compile(mode={best['mode']!r})",
            f"{best['images_per_s']:.0f} images/s", "reported", "INFO",
            f"first step (compile) {best['first_step_s']:.0f} s")
    ]  # fmt: skip
    defaults = (f.get("training") or {}).get("images_per_s_defaults")
    if defaults:
        rows.append(
            row("best", "example defaults vs plain PyTorch at its best",
                f"{defaults / best['images_per_s']:.0%} ({defaults:.0f} vs "
                f"{best['images_per_s']:.0f} images/s)", "reported", "INFO")
        )  # fmt: skip
    return rows


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
    "best": best_rows,
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
        "", "## Targets", "",
        "| part | target | measured | goal | published | verdict | note |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *(f"| {t['part']} | {t['name']} | {t['measured']} | {t['goal']} | {t['published']} | "
          f"{t['verdict']} | {t['note'].replace('|', '/')} |" for t in report["targets"]),
        "", "## Parts", "", "| part | status | seconds | logs |", "| --- | --- | --- | --- |",
        *(f"| {name} | {p['status']}{': ' + p['reason'] if p['reason'] else ''} | "
          f"{p['seconds']:.0f} | {', '.join(p['logs'])} |" for name, p in report["parts"].items()),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def say(message: str) -> None:
    print(f"gpu-report: {message}", file=sys.stderr, flush=True)


def run_part(name: str, run: Run, report_deadline: float) -> dict[str, Any]:
    """One part within its budget and the report's; a part with too little time left is not
    started."""
    before = set((run.out / "logs").iterdir())
    begin = time.monotonic()
    run.deadline = min(begin + run.sizes.budgets.get(name, math.inf), report_deadline)
    status, reason, figures = "ok", None, {}
    try:
        if run.deadline - begin < MIN_PART_S:
            raise Failed(f"not started: the report's {run.sizes.total_s:g} s were spent")
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
    report_deadline = begin + run.sizes.total_s
    try:
        for number, name in enumerate(wanted, 1):
            say(f"[{number}/{len(wanted)}] {name}")
            parts[name] = run_part(name, run, report_deadline)
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
