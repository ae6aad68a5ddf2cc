"""The best one device gives for a model and batch in plain PyTorch: everything on that helps
(bf16 autocast, channels_last, cuDNN autotuning, TF32) and `torch.compile(mode="max-autotune")`,
Inductor's slowest compile and fastest code (kernel autotuning, CUDA graphs).

    python -m benchmarks.gpu_report.plain_best [--device cuda] [--model resnet50]
        [--batch-size 128] [--image-size 224] [--steps 50] [--warmup 10] [--mode max-autotune]
        [--json]

`make gpu-report` sets the example's defaults against it (docs/gpu-report.md). A cold
max-autotune compile of resnet50 takes minutes; its cache (TORCHINDUCTOR_CACHE_DIR) makes the
next run quick. On a CPU the report runs it with `--mode default`: the code path, not a figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any


def best_step(
    model_name: str, batch_size: int, image_size: int, device_type: str, mode: str
) -> Callable[[], None]:
    """One training step at the device's best, as a function to call (unsynchronised)."""
    import torch
    from torchrig.models import build_model

    device = torch.device(device_type, 0) if device_type == "cuda" else torch.device("cpu")
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)
    model = build_model(model_name, 1000).to(device, memory_format=torch.channels_last)
    forward = torch.compile(model, mode=mode)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batch = torch.randn(batch_size, 3, image_size, image_size, device=device)
    batch = batch.contiguous(memory_format=torch.channels_last)
    targets = torch.randint(1000, (batch_size,), device=device)
    mark_step = getattr(torch.compiler, "cudagraph_mark_step_begin", lambda: None)

    def step() -> None:
        mark_step()  # CUDA graphs: this step's outputs may reuse the last one's memory
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss: Any = torch.nn.functional.cross_entropy(forward(batch), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    def synchronize() -> None:
        if args.device == "cuda":
            torch.cuda.synchronize()

    step = best_step(args.model, args.batch_size, args.image_size, args.device, args.mode)
    begin = time.perf_counter()
    step()  # compiled (autotuned) here
    synchronize()
    compile_s = time.perf_counter() - begin
    for _ in range(args.warmup):
        step()
    synchronize()
    begin = time.perf_counter()
    for _ in range(args.steps):
        step()
    synchronize()
    return {
        "benchmark": f"{args.device}: {args.model}, batch {args.batch_size}, "
        f"{args.image_size}px, bf16, channels_last, torch.compile(mode={args.mode!r})",
        "device": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "mode": args.mode,
        "first_step_s": round(compile_s, 2),
        "images_per_s": round(args.steps * args.batch_size / (time.perf_counter() - begin), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--mode", default="max-autotune", help="torch.compile's mode")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args(argv)
    result = measure(args)
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
