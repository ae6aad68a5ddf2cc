"""The parts, each a function of the run that runs its children and returns their figures (a
JSON-able dict), or raises `Failed` saying why it could not; `PARTS` in running order."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from torchrig.facts import children
from torchrig.launch import plan
from torchrig.launch.torchrun import TorchrunFlags

from benchmarks.gpu_report.runner import Failed, Run, Sizes, why
from testbed import EXAMPLE, traced_train

LOSS_LINE = re.compile(r"^step\s+(\d+) \| loss (\S+) \|", re.MULTILINE)
RESUMED_LINE = re.compile(r"resuming from step (\d+)")


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
        figures[flavour] = verify_run(document, done.seconds)
    figures["allreduce"] = allreduce_figures(json.loads((r.out / "verify-full.json").read_text()))
    # verify's matmul and triad method beside a plain torch loop, in one process.
    argv = [sys.executable, "-m", "benchmarks.gpu_report.verify_figures", "--device",
            r.sizes.device]  # fmt: skip
    figures["figures"] = r.json_of("verify-figures", argv)
    return figures


def verify_run(document: dict[str, Any], seconds: float) -> dict[str, Any]:
    """One verify run: its wall time, its summary and the checks that FAILed."""
    return {
        "seconds": round(seconds, 2),
        "summary": " ".join(f"{n} {v}" for n, v in (document.get("summary") or {}).items()),
        "failed": [
            f"{c['section']}/{c['name']}: {c['summary']}"
            for c in document.get("checks", [])
            if c.get("verdict") == "FAIL"
        ],
    }


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
            "--image-size", str(s.image_size)]  # fmt: skip


def part_compile(r: Run) -> dict[str, Any]:
    argv = [sys.executable, "-m", "benchmarks.train_throughput", "compile",
            *throughput_args(r.sizes), "--steps", "3"]  # fmt: skip
    return {run: r.json_of(f"compile-{run}", argv, r.compiling_env()) for run in ("cold", "warm")}


def part_training(r: Run) -> dict[str, Any]:
    s = r.sizes
    argv = [sys.executable, "-m", "benchmarks.train_throughput", "gpu", *throughput_args(s),
            "--steps", str(s.steps), "--warmup", str(s.warmup)]  # fmt: skip
    # The compile part ran first, so the "defaults" loop starts from a warm cache.
    return r.json_of("training", argv, r.compiling_env())


# torch.compile's modes, as the example's --compile-mode offers them.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")
SKIP_LINE = re.compile(r"skipping cudagraphs due to (.*)")


def part_modes(r: Run) -> dict[str, Any]:
    """The example's step in each compile mode: its DDP wrap (a group of one) and its own model
    (resnet18 on a GPU, which no part before compiled; the cache key holds the mode), a child
    each. Each gets an even share of the time left, what one leaves going to those after it,
    and one that fails or runs out of time leaves the others their figures."""
    s = r.sizes
    shape = replace(s, model=s.modes_model)
    env = {**r.compiling_env(), "TORCH_LOGS": "cudagraphs"}  # says why a graph skipped them
    figures: dict[str, Any] = {}
    for index, mode in enumerate(COMPILE_MODES):
        share = (r.deadline - time.monotonic()) / (len(COMPILE_MODES) - index)
        argv = [sys.executable, "-m", "benchmarks.train_throughput", "compile",
                *throughput_args(shape), "--steps", str(s.steps), "--compile-mode", mode,
                "--ddp"]  # fmt: skip
        done = r.child(f"modes-{mode}", argv, env, limit_s=share)
        result = children.last_json_object(done.stdout)
        if not done.ok or result is None:
            figures[mode] = {"failed": why(done), "timed_out": done.timed_out}
            continue
        skipped = SKIP_LINE.search(done.stderr)
        figures[mode] = {**result, "skip_reason": skipped and skipped.group(1).strip()[:200]}
    return figures


def part_checkpoint(r: Run) -> dict[str, Any]:
    argv = [sys.executable, "-m", "benchmarks.checkpoint_io", "--dir", str(r.disk), "--mb",
            str(r.sizes.checkpoint_mb), "--repeats", "2", "--device", r.sizes.device]  # fmt: skip
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
    # On this machine alone, as `torchrig launch` runs it: torchrun's --standalone would put its
    # rendezvous state, which it unpickles, on a port of every interface.
    env.update(plan.socket_interfaces(env, plan.LOOPBACK))
    rendezvous, _ = plan.one_machine_rendezvous(TorchrunFlags(), env)

    def argv(folder: Path, *extra: str) -> list[str]:
        example = [*shlex.split(r.sizes.resume), "--checkpoint-dir", str(folder),
                   "--save-final", str(folder / "final.pt"), *extra]  # fmt: skip
        return [sys.executable, "-m", "torch.distributed.run", *rendezvous, "--nproc-per-node",
                str(nproc), *traced_train.command(str(EXAMPLE), example,
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
# starts from the warm cache), the tests after the parts they back up, and last the compile
# modes, which get the time left (three cold compiles, max-autotune's taking minutes).
PARTS: dict[str, Callable[[Run], dict[str, Any]]] = {
    "verify": part_verify,
    "compile": part_compile,
    "training": part_training,
    "resume": part_resume,
    "checkpoint": part_checkpoint,
    "tests": part_tests,
    "modes": part_modes,
}
