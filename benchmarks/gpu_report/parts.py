"""The report's parts: each runs repository commands as child processes (with deadlines, logs in
<out>/logs) and returns its figures. The report's own process never touches the GPU, so that
verify's "other processes" check and the benchmarks see the GPU as a user's job would.

A part raises `Skipped` when it does not apply here and `Failed` when it could not do its job;
the message is the one line the report shows.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchrig import children
from torchrig.facts import nvml

from . import procs, readers, smi
from .resume import ResumeFailed, ResumePlan, run_experiment

REPO_ROOT = Path(__file__).resolve().parents[2]


class Skipped(Exception):
    """The part does not apply on this machine (the message says why)."""


class Failed(Exception):
    """The part could not do its job (the message says why)."""


@dataclass(frozen=True)
class Sizes:
    """How big each part's work is: a real workload on a GPU, the smallest that runs on a CPU."""

    device: str  # "cuda" or "cpu"
    model: str  # training throughput and torch.compile
    batch_size: int
    image_size: int
    steps: int
    warmup: int
    resume_args: list[str]
    resume_step_delay: float
    resume_nproc: int | None  # None: one process per visible GPU
    checkpoint_mb: int
    checkpoint_repeats: int
    timeouts: dict[str, float] = field(default_factory=dict)


# Both sizes: FSDP2 with sharded checkpoints, a loss line every step, a fixed seed.
COMMON_RESUME = "--fsdp --log-every 1 --seed 7"
GPU_SIZES = Sizes(
    device="cuda",
    model="resnet50",  # the workload: resnet50 at 224 px
    batch_size=128,
    image_size=224,
    steps=50,
    warmup=10,
    # The example's GPU defaults (bf16, channels_last, compile) on a small workload: 30 steps,
    # a checkpoint every 10; run 2 is killed after the first one.
    resume_args=shlex.split(
        "--device cuda --model resnet18 --image-size 64 --num-classes 100 --synthetic-size 8192 "
        f"--batch-size 64 --steps 30 --warmup-steps 3 --checkpoint-every 10 {COMMON_RESUME}"
    ),
    resume_step_delay=0.5,
    resume_nproc=None,
    checkpoint_mb=1000,
    checkpoint_repeats=3,
    timeouts={
        "smi": 60,
        "verify-quick": 120,
        "verify-full": 300,
        "tests": 600,
        "compile": 420,
        "training": 480,
        "resume": 420,
        "checkpoint": 420,
    },
)
CPU_SIZES = Sizes(
    device="cpu",
    model="tiny",
    batch_size=16,
    image_size=32,
    steps=5,
    warmup=2,
    resume_args=shlex.split(
        "--device cpu --model tiny --image-size 8 --num-classes 4 --synthetic-size 96 "
        f"--batch-size 4 --steps 12 --warmup-steps 2 --checkpoint-every 4 {COMMON_RESUME}"
    ),
    resume_step_delay=0.6,
    resume_nproc=2,
    checkpoint_mb=20,
    checkpoint_repeats=2,
    timeouts={
        "smi": 60,
        "verify-quick": 180,
        "verify-full": 420,
        "tests": 300,
        "compile": 600,
        "training": 600,
        "resume": 300,
        "checkpoint": 300,
    },
)


@dataclass
class Runner:
    """What every part needs: where to write, how big, and how to run a child command."""

    out: Path
    sizes: Sizes
    env: dict[str, str]
    compile_cache: Path  # a fresh TORCHINDUCTOR_CACHE_DIR for the compiling parts
    gpu_count: int
    checkpoint_disk: Path
    python: str = sys.executable

    @property
    def cpu(self) -> bool:
        return self.sizes.device == "cpu"

    def log(self, name: str) -> Path:
        return self.out / "logs" / f"{name}.log"

    def run(
        self, name: str, argv: list[str], timeout: float, env: dict[str, str] | None = None
    ) -> procs.Finished:
        return procs.run(argv, self.log(name), env or self.env, REPO_ROOT, timeout)

    def compiling_env(self) -> dict[str, str]:
        """The fresh compile cache, Triton's inside it (so a global TRITON_CACHE_DIR cannot make
        a cold compile look warm)."""
        env = {**self.env, "TORCHINDUCTOR_CACHE_DIR": str(self.compile_cache)}
        env.pop("TRITON_CACHE_DIR", None)
        return env

    def script(self, name: str, *args: str) -> list[str]:
        return [self.python, str(Path("benchmarks") / name), *args]


def last_json(done: procs.Finished, what: str, timeout: float) -> dict[str, Any]:
    result = children.last_json_object(done.stdout)
    if not done.ok or result is None:
        raise Failed(f"{what}: {done.why(timeout)}")
    return result


def require_module(name: str, install: str) -> None:
    if importlib.util.find_spec(name) is None:
        raise Failed(f"{name} is not installed here: {install}")


# --- nvidia-smi against NVML --------------------------------------------------------------

SMI_ATTEMPTS = 3  # clock reasons can change between two readings; agree within three tries


def part_smi(r: Runner) -> dict[str, Any]:
    if shutil.which("nvidia-smi") is None:
        if r.cpu:
            raise Skipped("no nvidia-smi on this machine (--cpu)")
        raise Failed("nvidia-smi is not on PATH: the comparison needs it")
    timeout = r.sizes.timeouts["smi"]
    attempts = 0
    while True:
        attempts += 1
        done = r.run("nvidia-smi", ["nvidia-smi", "-q", "-x"], timeout)
        snapshot = nvml.read_snapshot()
        if not done.ok:
            raise Failed(f"nvidia-smi -q -x: {done.why(timeout)}")
        if not snapshot.available:
            raise Failed(f"NVML: {snapshot.error}")
        reading = smi.parse_smi_xml(done.stdout)
        rows, unpaired = smi.compare(snapshot, reading)
        if (all(row.match for row in rows) and not unpaired) or attempts == SMI_ATTEMPTS:
            break
    (r.out / "nvidia-smi.xml").write_text(done.stdout)
    (r.out / "nvml.json").write_text(json.dumps(snapshot.to_dict(), indent=2))
    return {
        "attempts": attempts,
        "nvml_driver": snapshot.driver_version,
        "nvidia_smi_driver": reading.driver_version,
        "nvidia_smi_cuda": reading.cuda_version,
        "comparisons": [smi.comparison_to_dict(row) for row in rows],
        "unpaired": unpaired,
    }


# --- torchrig verify ----------------------------------------------------------------------


def part_verify(r: Runner) -> dict[str, Any]:
    runs, documents = {}, {}
    for flavour, extra in (("quick", ["--quick"]), ("full", [])):
        name = f"verify-{flavour}"
        timeout = r.sizes.timeouts[name]
        argv = [r.python, "-m", "torchrig.verify", "--json", *extra, *(["--cpu"] if r.cpu else [])]
        done = r.run(name, argv, timeout)
        try:
            document = json.loads(done.stdout)
        except ValueError:
            raise Failed(f"{name} printed no JSON report, {done.why(timeout)}") from None
        (r.out / f"{name}.json").write_text(done.stdout)
        if done.returncode not in (0, 1):  # 1 is "a check FAILed": a verdict, reported as such
            raise Failed(f"{name}: {done.why(timeout)} {document.get('hint') or ''}".strip())
        runs[flavour], documents[flavour] = readers.verify_run(document, done.seconds), document
    return {**runs, **readers.verify_figures(documents["full"])}


# --- the gpu marker tests -----------------------------------------------------------------


def part_tests(r: Runner) -> dict[str, Any]:
    require_module("pytest", "pip install pytest")
    junit = r.out / "gpu-tests.xml"
    timeout = r.sizes.timeouts["tests"]
    argv = [r.python, "-m", "pytest", "-m", "gpu", "tests/gpu", "-p", "no:cacheprovider",
            f"--junitxml={junit}"]  # fmt: skip
    done = r.run("tests", argv, timeout)
    # 0: all passed, 1: some failed, 5: none collected; anything else is pytest itself failing.
    if done.returncode not in (0, 1, 5) or not junit.is_file():
        raise Failed(f"pytest: {done.why(timeout)}")
    return readers.parse_junit(junit.read_text())


# --- torch.compile: cold, then warm from the same cache -----------------------------------


def part_compile(r: Runner) -> dict[str, Any]:
    s = r.sizes
    timeout = s.timeouts["compile"]
    argv = r.script(
        "train_throughput.py", "compile", "--device", s.device, "--model", s.model,
        "--batch-size", str(s.batch_size), "--image-size", str(s.image_size), "--steps", "3",
        "--json",
    )  # fmt: skip
    figures: dict[str, Any] = {"cache_dir": str(r.compile_cache)}
    for run_name in ("cold", "warm"):
        done = r.run(f"compile-{run_name}", argv, timeout, r.compiling_env())
        figures[run_name] = last_json(done, f"the {run_name} compile run", timeout)
    return figures


# --- training throughput ------------------------------------------------------------------


def part_training(r: Runner) -> dict[str, Any]:
    s = r.sizes
    timeout = s.timeouts["training"]
    argv = r.script(
        "train_throughput.py", "gpu", "--device", s.device, "--model", s.model,
        "--batch-size", str(s.batch_size), "--image-size", str(s.image_size),
        "--steps", str(s.steps), "--warmup", str(s.warmup), "--no-example", "--json",
    )  # fmt: skip
    # The compile part ran first, so the "defaults" loop starts from a warm cache.
    return last_json(r.run("training", argv, timeout, r.compiling_env()), "the benchmark", timeout)


# --- FSDP2 kill and resume ----------------------------------------------------------------


def part_resume(r: Runner) -> dict[str, Any]:
    s = r.sizes
    nproc = s.resume_nproc or r.gpu_count
    if nproc < 1:
        raise Failed("no GPU visible for the FSDP2 run")
    plan = ResumePlan(
        nproc=nproc,
        example_args=s.resume_args,
        step_delay=s.resume_step_delay,
        # train_ddp.py turns on torch.use_deterministic_algorithms on the CPU only: on GPUs the
        # deterministic kernels cost speed.
        deterministic=r.cpu,
        timeout=s.timeouts["resume"],
    )
    env = r.compiling_env()
    if r.cpu:
        env["OMP_NUM_THREADS"] = "1"  # two ranks on few cores must not oversubscribe them
    work = r.out / "resume-checkpoints"
    shutil.rmtree(work, ignore_errors=True)

    def run(name: str, argv: list[str], timeout: float) -> procs.Finished:
        return r.run(name, argv, timeout, env)

    def start(name: str, argv: list[str]) -> Any:
        return procs.start(argv, r.log(name), env, REPO_ROOT)

    def read_log(name: str) -> str:
        return r.log(name).read_text(errors="replace")

    try:
        return run_experiment(r.python, plan, work, run, start, read_log)
    except ResumeFailed as exc:
        raise Failed(str(exc)) from None
    finally:
        shutil.rmtree(work, ignore_errors=True)  # checkpoints and weights: figures are kept


# --- checkpoint save/load against the raw disk --------------------------------------------


def part_checkpoint(r: Runner) -> dict[str, Any]:
    s = r.sizes
    timeout = s.timeouts["checkpoint"]
    argv = r.script(
        "checkpoint_io.py", "--dir", str(r.checkpoint_disk), "--mb", str(s.checkpoint_mb),
        "--repeats", str(s.checkpoint_repeats), "--device", s.device, "--json",
    )  # fmt: skip
    done = r.run("checkpoint", argv, timeout)
    try:
        figures = json.loads(done.stdout)
    except ValueError:
        raise Failed(f"checkpoint_io: {done.why(timeout)}") from None
    figures["disk"] = str(r.checkpoint_disk)
    return figures


# In the order they run: the idle-GPU comparison first, verify before anything loads the GPU,
# compile before training (which then starts from the warm cache), the tests last (they run
# verify again, and are the part most likely to need its whole deadline).
PARTS: dict[str, Callable[[Runner], dict[str, Any]]] = {
    "smi": part_smi,
    "verify": part_verify,
    "compile": part_compile,
    "training": part_training,
    "resume": part_resume,
    "checkpoint": part_checkpoint,
    "tests": part_tests,
}

PART_HELP = {
    "smi": "nvidia-smi -q -x against torchrig's NVML reading, facts and verdicts",
    "verify": "torchrig verify --quick and full, timed, with --json",
    "compile": "torch.compile's first step cold, then again from the same cache",
    "training": "example defaults vs a naive fp32 loop; DDP with one process vs none",
    "resume": "FSDP2 run killed after a checkpoint and resumed, against an uninterrupted one",
    "checkpoint": "CheckpointManager save/load of a ~1 GB model against raw disk I/O",
    "tests": "pytest -m gpu tests/gpu",
}


def child_env(environ: dict[str, str]) -> dict[str, str]:
    """The children import torchrig from this tree, and print plain lines (no progress bars)."""
    env = dict(environ)
    scripts = str(REPO_ROOT / "scripts")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [scripts, environ.get("PYTHONPATH")]))
    env["TQDM_DISABLE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env
