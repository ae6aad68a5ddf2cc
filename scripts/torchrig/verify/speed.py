"""How verify times work on a device: warm clocks, then the best of a few runs of at least half a
second; matmul TFLOP/s and a STREAM triad by that method. The public home of the method: verify's
probes call it, and the GPU report runs it beside a plain torch loop in one process
(benchmarks/gpu_report/verify_figures.py). torch is an argument: this module imports only the
standard library."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from torchrig.shared.voice import GIB, MIB


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
