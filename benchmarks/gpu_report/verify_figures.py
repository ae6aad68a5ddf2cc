"""verify's matmul and triad method beside a plain torch loop, in one process on one device.

    python -m benchmarks.gpu_report.verify_figures [--device cuda|cpu]

The plain loop is what a user would write: 3 warm-up and 20 timed calls, CUDA events on a GPU.
It runs before and after verify's method (`torchrig.verify.speed`, the very functions verify
calls), so neither gets the clocks the other warmed; the better of its two runs is the
reference. `make gpu-report` judges verify against it (docs/gpu-report.md). On a CPU the same
code runs with verify's CPU sizes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import torch
from torchrig.verify import speed

PLAIN_WARMUP, PLAIN_TIMED = 3, 20
GPU_SIZE, CPU_SIZE = 8192, 512  # verify's matmul sizes (probes.run_gpu_figures / run_cpu_figures)
CPU_ARRAY_BYTES = 16 << 20  # a quarter of verify's: on a CPU the figures are only shown


def plain_seconds_per_call(device: str, work: Any) -> float:
    """3 warm-up calls, then 20 timed ones (CUDA events around them on a GPU): no more."""
    for _ in range(PLAIN_WARMUP):
        work()
    return speed.timer(torch, device, work)(PLAIN_TIMED) / PLAIN_TIMED


def plain_matmul_tflops(device: str, dtype: Any, size: int) -> float:
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    return 2 * size**3 / plain_seconds_per_call(device, lambda: a @ b) / 1e12


def plain_triad_gbps(device: str, nbytes: int) -> float:
    n = nbytes // 4
    b = torch.randn(n, device=device)
    c = torch.randn(n, device=device)
    return 3 * n * 4 / plain_seconds_per_call(device, lambda: torch.add(b, c, alpha=3.0)) / 1e9


def measure(device: str, size: int, nbytes: int, timing: speed.Timing) -> dict[str, Any]:
    """verify's figures and the plain loop's, for the dtypes verify measures on this device."""
    dtypes = ("bf16", "fp16") if device.startswith("cuda") else ("bf16",)
    torch_dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}

    def plain() -> dict[str, float]:
        runs = {name: plain_matmul_tflops(device, torch_dtypes[name], size) for name in dtypes}
        return {**runs, "triad_gbps": plain_triad_gbps(device, nbytes)}

    before = plain()
    verify = {name: speed.matmul_tflops(torch, device, name, size, timing) for name in dtypes}
    verify["triad_gbps"] = speed.memory_gbps(torch, device, nbytes, timing)
    after = plain()
    return {
        "verify": verify,
        "plain": {key: max(before[key], after[key]) for key in before},
        "plain_runs": {key: [before[key], after[key]] for key in before},
        "size": size,
        "array_bytes": nbytes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    args = parser.parse_args(argv)
    begin = time.monotonic()
    if args.device == "cuda":
        if not torch.cuda.is_available():
            print("verify_figures: no CUDA device; use --device cpu", file=sys.stderr)
            return 2
        device, label = "cuda:0", "GPU0"
        gpu = torch.cuda.get_device_name(0)
        nbytes = speed.array_size(torch, device)
        result = measure(device, GPU_SIZE, nbytes, speed.GPU_TIMING)
    else:
        device, label, gpu = "cpu", "cpu", None
        result = measure(device, CPU_SIZE, CPU_ARRAY_BYTES, speed.CPU_TIMING)
    result.update(device=device, label=label, gpu=gpu, seconds=time.monotonic() - begin)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
