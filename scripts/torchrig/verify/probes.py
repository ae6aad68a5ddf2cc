"""Probes: matmul TFLOP/s and memory bandwidth against spec peaks, and the torch.compile
verdict. torch is an argument: this module imports only the standard library."""

from __future__ import annotations

from typing import Any

from torchrig.facts import children
from torchrig.facts.verdict import Check, failed, passed, warned
from torchrig.verify.peaks import Peak, peak_for
from torchrig.verify.speed import (
    CPU_TIMING,
    GPU_TIMING,
    Timing,
    array_size,
    matmul_tflops,
    memory_gbps,
)

SECTION = "probes"
# Below this fraction of the data-sheet peak something is wrong (clocks held down, power cap,
# a shared GPU). Well-behaved GPUs reach 0.6-0.85 on large dense matmuls and memory copies.
LOW_FRACTION = 0.4


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
