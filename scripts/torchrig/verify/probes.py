"""Probes: matmul TFLOP/s and memory bandwidth against spec peaks, numerics, AMP, and the
torch.compile verdict. torch is an argument: this module imports only the standard library."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from torchrig import children
from torchrig.facts.verdict import Check, failed, passed, warned
from torchrig.shared.voice import GIB, MIB
from torchrig.verify.peaks import Peak, peak_for

SECTION = "probes"
# Below this fraction of the data-sheet peak something is wrong (clocks held down, power cap,
# a shared GPU). Well-behaved GPUs reach 0.6-0.85 on large dense matmuls and memory copies.
LOW_FRACTION = 0.4
NUMERICS_TOLERANCE = 1e-4  # relative, fp32 against fp64 on the CPU
AMP_TOLERANCE = 3e-2  # relative, bf16/fp16 autocast against fp32


@dataclass(frozen=True)
class Timing:
    """How a figure is timed: short batches for at least `warmup_min_s` and until two in a row
    agree (a cold GPU idles at a fraction of its boost clock and takes a moment to ramp; a
    plateau on the way up looks stable, hence the minimum), then the best of `repeats` runs of
    at least `min_seconds` each (a moment's interruption lowers one run, not the figure)."""

    min_seconds: float = 0.5
    repeats: int = 3
    warmup_batch_s: float = 0.1
    warmup_min_s: float = 1.0
    warmup_max_s: float = 3.0  # clocks that never settle: measure anyway
    stable_within: float = 0.02  # two warm-up batches this close: warm


GPU_TIMING = Timing()
# A CPU's figures are for information (no spec peak to judge them by): the same method, shorter.
CPU_TIMING = Timing(min_seconds=0.1, warmup_batch_s=0.05, warmup_min_s=0.1, warmup_max_s=0.5)
MAX_ITERATIONS = 100_000


def timer(torch: Any, device: str, work: Callable[[], object]) -> Callable[[int], float]:
    """measure(n): seconds for n calls of `work`, by CUDA events on a GPU."""

    def measure(iterations: int) -> float:
        if device.startswith("cuda"):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iterations):
                work()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000.0
        begin = time.perf_counter()
        for _ in range(iterations):
            work()
        return time.perf_counter() - begin

    return measure


def seconds_per_call(measure: Callable[[int], float], timing: Timing) -> float:
    """Seconds per call on warm clocks: the best of the timed runs."""
    per_call = warm_up(measure, timing)
    best = math.inf
    for _ in range(timing.repeats):
        seconds, iterations = timed_run(measure, per_call, timing.min_seconds)
        per_call = seconds / iterations
        best = min(best, per_call)
    return best


def timed_run(
    measure: Callable[[int], float], per_call: float, min_seconds: float
) -> tuple[float, int]:
    """(seconds, iterations) of one run of at least `min_seconds`: a run that came out shorter
    (the calls got faster since they were sized) is sized again and run again."""
    while True:
        iterations = min(MAX_ITERATIONS, max(3, math.ceil(min_seconds * 1.05 / per_call)))
        seconds = measure(iterations)
        if seconds >= min_seconds or iterations == MAX_ITERATIONS:
            return seconds, iterations
        per_call = max(seconds / iterations, 1e-9)


def warm_up(measure: Callable[[int], float], timing: Timing) -> float:
    """Batches of about `warmup_batch_s` until two in a row give the same rate; seconds per call
    of the last one."""
    spent = per_call = max(measure(1), 1e-9)  # the first call also sets up (cuBLAS, caches)
    while spent < timing.warmup_max_s:
        batch = min(MAX_ITERATIONS, max(1, int(timing.warmup_batch_s / per_call)))
        seconds = measure(batch)
        spent += seconds
        previous, per_call = per_call, max(seconds / batch, 1e-9)
        stable = abs(per_call - previous) <= timing.stable_within * previous
        if stable and spent >= timing.warmup_min_s:
            break
    return per_call


@contextlib.contextmanager
def tf32(torch: Any, enabled: bool) -> Iterator[None]:
    """Set TF32 for matmul and cuDNN for the block, then put the user's setting back."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def matmul_tflops(
    torch: Any, device: str, dtype_name: str, size: int, timing: Timing = GPU_TIMING
) -> float:
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}
    dtype = dtypes.get(dtype_name, torch.float32)
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    # A plain `a @ b`, as training code calls it: writing into `out=` measured 5 % slower on an
    # H100 (cuBLAS picks its kernel per call either way; the allocator hands the block back).
    with tf32(torch, dtype_name == "tf32"):
        seconds = seconds_per_call(timer(torch, device, lambda: torch.matmul(a, b)), timing)
    return 2 * size**3 / seconds / 1e12


def memory_gbps(torch: Any, device: str, nbytes: int, timing: Timing = GPU_TIMING) -> float:
    """STREAM's triad, a = b + s * c, on `nbytes` arrays; counts the bytes read and written
    (3 arrays), as published triad runs and bandwidth specs do."""
    n = nbytes // 4
    b = torch.randn(n, dtype=torch.float32, device=device)
    c = torch.randn(n, dtype=torch.float32, device=device)
    a = torch.empty_like(b)
    work = timer(torch, device, lambda: torch.add(b, c, alpha=3.0, out=a))
    return 3 * n * 4 / seconds_per_call(work, timing) / 1e9


def array_size(torch: Any, device: str) -> int:
    """1 GiB per array, or less on a GPU with little free memory (the triad holds three)."""
    if not device.startswith("cuda"):
        return 64 * MIB
    free, _total = torch.cuda.mem_get_info(torch.device(device))
    return int(min(GIB, free // 6))


def matmul_check(label: str, name: str, tflops: dict[str, float], peak: Peak | None) -> Check:
    """One row per GPU: every dtype's TFLOP/s, and its fraction of the spec peak when known."""
    fractions: dict[str, float] = {}
    parts = []
    for dtype_name, measured in tflops.items():
        spec = getattr(peak, f"{dtype_name}_tflops", None)
        if spec:
            fractions[dtype_name] = measured / spec
            parts.append(f"{dtype_name} {measured:.0f} ({measured / spec:.0%} of {spec:g})")
        else:
            parts.append(f"{dtype_name} {measured:.1f}")
    summary = f"{name}: TFLOP/s " + ", ".join(parts)
    data = {"tflops": tflops, "fraction_of_peak": fractions, "peak_model": peak and peak.model}
    low = [dtype for dtype, fraction in fractions.items() if fraction < LOW_FRACTION]
    if low:
        return warned(
            SECTION,
            f"{label} matmul",
            summary,
            f"{'/'.join(low)} under {LOW_FRACTION:.0%} of peak: check clocks and power "
            "(`nvidia-smi -q -d PERFORMANCE`), other processes",
            **data,
        )
    if peak is None:
        summary += " (GPU not in the peak table)"
    return passed(SECTION, f"{label} matmul", summary, **data)


def bandwidth_check(label: str, gbps: float, peak: Peak | None) -> Check:
    data: dict[str, Any] = {"gbps": gbps, "peak_gbps": peak and peak.memory_gbps}
    if peak is None:
        return passed(SECTION, f"{label} memory", f"triad {gbps:.0f} GB/s", **data)
    fraction = gbps / peak.memory_gbps
    data["fraction_of_peak"] = fraction
    summary = f"triad {gbps:.0f} GB/s ({fraction:.0%} of {peak.memory_gbps:g})"
    if fraction < LOW_FRACTION:
        return warned(
            SECTION,
            f"{label} memory",
            summary,
            "memory bandwidth far under spec: check memory clocks and other processes",
            **data,
        )
    return passed(SECTION, f"{label} memory", summary, **data)


def relative_error(torch: Any, result: Any, reference: Any) -> float:
    scale = float(reference.abs().max()) or 1.0
    difference = (result.double().cpu() - reference).abs().max()
    if not bool(torch.isfinite(difference)):
        return float("inf")
    return float(difference) / scale


def numerics_check(errors: dict[str, float], device: str) -> Check:
    summary = ", ".join(f"{name} rel. error {error:.1e}" for name, error in errors.items())
    bad = [name for name, error in errors.items() if not error <= NUMERICS_TOLERANCE]
    if bad:
        return failed(
            SECTION,
            "numerics",
            f"{device} vs CPU: {summary}",
            f"{'/'.join(bad)} wrong beyond {NUMERICS_TOLERANCE:g}: test the GPU "
            "(`dcgmi diag -r 3`), check the driver",
            errors=errors,
        )
    return passed(SECTION, "numerics", f"{device} vs CPU fp64: {summary}", errors=errors)


def run_numerics(torch: Any, device: str) -> Check:
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(256, 512, generator=generator)
    b = torch.randn(512, 384, generator=generator)
    images = torch.randn(4, 8, 32, 32, generator=generator)
    weights = torch.randn(16, 8, 3, 3, generator=generator)
    # The device computes in fp32 with TF32 off, so it must match fp64 closely.
    with tf32(torch, False):
        matmul = torch.matmul(a.to(device), b.to(device))
        conv = torch.nn.functional.conv2d(images.to(device), weights.to(device), padding=1)
    errors = {
        "matmul": relative_error(torch, matmul, a.double() @ b.double()),
        "conv": relative_error(
            torch, conv, torch.nn.functional.conv2d(images.double(), weights.double(), padding=1)
        ),
    }
    return numerics_check(errors, device)


def run_amp(torch: Any, device: str) -> Check:
    generator = torch.Generator().manual_seed(1)
    layer = torch.nn.Linear(256, 128).to(device)
    inputs = torch.randn(64, 256, generator=generator).to(device)
    bf16 = not device.startswith("cuda") or torch.cuda.is_bf16_supported()
    dtype = torch.bfloat16 if bf16 else torch.float16
    with torch.no_grad():
        reference = layer(inputs).double().cpu()
        with torch.autocast(device_type=device.split(":")[0], dtype=dtype):
            output = layer(inputs)
    error = relative_error(torch, output, reference)
    dtype_name = str(dtype).removeprefix("torch.")
    data = {"dtype": dtype_name, "output_dtype": str(output.dtype), "error": error}
    if output.dtype != dtype:
        return failed(
            SECTION,
            "amp",
            f"autocast({dtype_name}) left a Linear in {output.dtype}",
            "autocast is not active for this device: check the torch build",
            **data,
        )
    if not error <= AMP_TOLERANCE:
        return failed(
            SECTION,
            "amp",
            f"autocast({dtype_name}) rel. error {error:.1e}",
            "mixed precision gives wrong results: test the GPU (`dcgmi diag -r 3`)",
            **data,
        )
    return passed(SECTION, "amp", f"autocast({dtype_name}) Linear, rel. error {error:.1e}", **data)


def run_gpu_figures(
    torch: Any, index: int, name: str, label: str, size: int = 8192, timing: Timing = GPU_TIMING
) -> list[Check]:
    device = f"cuda:{index}"
    peak = peak_for(name)
    try:
        with torch.cuda.device(index):
            tflops = {
                dtype_name: matmul_tflops(torch, device, dtype_name, size, timing)
                for dtype_name in ("bf16", "fp16", "tf32")
            }
            gbps = memory_gbps(torch, device, array_size(torch, device), timing)
            torch.cuda.empty_cache()
    except Exception as exc:  # an out-of-memory or a dying GPU: the verdict, not a traceback
        return [
            failed(
                SECTION,
                f"{label} matmul",
                f"probe failed: {first_line(exc)}",
                "check `nvidia-smi` for other processes and the kernel log for Xid errors",
            )
        ]
    return [matmul_check(label, name, tflops, peak), bandwidth_check(label, gbps, peak)]


def run_cpu_figures(torch: Any, size: int = 512, timing: Timing = CPU_TIMING) -> list[Check]:
    """The same figures on the CPU, absolute only: there is no spec peak to set them against."""
    tflops = {name: matmul_tflops(torch, "cpu", name, size, timing) for name in ("fp32", "bf16")}
    gbps = memory_gbps(torch, "cpu", array_size(torch, "cpu"), timing)
    gflops = ", ".join(f"{name} {value * 1000:.1f}" for name, value in tflops.items())
    return [
        passed(SECTION, "cpu matmul", f"GFLOP/s {gflops} (n={size})", tflops=tflops),
        passed(SECTION, "cpu memory", f"triad {gbps:.1f} GB/s", gbps=gbps),
    ]


def guarded(name: str, probe: Callable[[], Check]) -> Check:
    """Run one probe; an exception becomes its FAIL."""
    try:
        return probe()
    except Exception as exc:
        return failed(
            SECTION,
            name,
            f"raised {type(exc).__name__}: {first_line(exc)}",
            "see the error; run `python -c 'import torch; torch.randn(2, device=\"cuda\")'`",
        )


def first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:200] if lines else type(exc).__name__


# --- torch.compile, run in a helper process (compile_smoke.py) ------------------------------

COMPILER_WORDS = ("compiler", "gcc", "cc1", "g++", "clang", "python.h", "invalid_cxx_compiler")
# How torch.compile fails when its cache folder cannot be written (a read-only image, a HOME
# that is not the user's).
UNWRITABLE_WORDS = ("read-only file system", "permission denied")


def compile_check(outcome: Any, timeout: float, device: str) -> Check:
    """The verdict on a `compile_smoke` run (a children.Outcome)."""
    if outcome.timed_out:
        return warned(
            SECTION,
            "torch.compile",
            f"not done after {timeout:g} s on {device}"
            + children.stuck_note(["the compile test"] if outcome.stuck else []),
            "a cold compile is slow on few CPUs: raise --timeout; persist TORCHINDUCTOR_CACHE_DIR",
        )
    result = children.last_json_object(outcome.stdout)
    if result is None:
        return failed(
            SECTION,
            "torch.compile",
            f"the compile test crashed (exit {outcome.returncode}): {last_line(outcome.stderr)}",
            "run `python -m torchrig.verify.compile_smoke` to see the error",
        )
    seconds = result.get("seconds", 0.0)
    if result.get("ok"):
        return passed(
            SECTION,
            "torch.compile",
            f"compiled and matched eager on {device} in {seconds:.1f} s",
            **result,
        )
    error = str(result.get("error") or f"result differs from eager by {result.get('max_error')}")
    detail = (error + " " + str(result.get("detail", ""))).lower()
    fix = "run `python -m torchrig.verify.compile_smoke` for the full error"
    if any(word in detail for word in COMPILER_WORDS):
        fix = "install a C compiler and headers: `apt-get install -y build-essential python3-dev`"
    elif "failed to map segment" in detail:
        fix = (
            "torch.compile's cache folder is on a noexec mount (its compiled code cannot be "
            "loaded from there): point HOME, XDG_CACHE_HOME or TORCHINDUCTOR_CACHE_DIR at a "
            "folder mounted with exec"
        )
    elif any(word in detail for word in UNWRITABLE_WORDS):
        fix = (
            "torch.compile's cache folder is not writable: set HOME (or XDG_CACHE_HOME, or "
            "TORCHINDUCTOR_CACHE_DIR) to a folder you can write"
        )
    return failed(SECTION, "torch.compile", f"{device}: {error}", fix, **result)


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"
