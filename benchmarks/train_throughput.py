"""Training throughput: what the example's defaults buy, and what DDP costs.

    python -m benchmarks.train_throughput gpu     [--model resnet18] [--batch-size 128]
    python -m benchmarks.train_throughput compile [--model resnet18] [--batch-size 128]
                                                  [--compile-mode MODE] [--ddp]

gpu: naive against the example's defaults, and the cost of DDP; compile: the first step against
later ones and their images/s, in one torch.compile mode, with or without the example's DDP wrap
(a group of one), the compile caches and the graphs that skipped CUDA graphs (docs/benchmarks.md,
"Training"; docs/gpu-report.md), as one JSON line. `--device cpu` proves the code path without a
GPU; its figures say nothing about one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext


def train_step(
    model_name: str,
    batch_size: int,
    image_size: int,
    *,
    fast: bool,
    compile_mode: str | None,
    ddp: bool,
    device_type: str = "cuda",
) -> Callable[[], None]:
    """One training step on a device-resident batch, as a function to call (unsynchronised);
    compiled in `compile_mode` (torch.compile's), eager with None."""
    import torch
    import torch.nn.functional as F
    from torchrig.train.distributed import wrap_ddp
    from torchrig.train.models import build_model

    device = torch.device(device_type, 0) if device_type == "cuda" else torch.device("cpu")
    on_gpu = device.type == "cuda"
    torch.backends.cudnn.benchmark = fast
    torch.backends.cuda.matmul.allow_tf32 = fast
    torch.backends.cudnn.allow_tf32 = fast
    torch.manual_seed(0)
    memory_format = torch.channels_last if fast else torch.contiguous_format
    model = build_model(model_name, 1000).to(device, memory_format=memory_format)
    if ddp:
        model = wrap_ddp(model, [0] if on_gpu else None)  # the example's wrap
    step_model = torch.compile(model, mode=compile_mode) if compile_mode else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    bf16 = not on_gpu or torch.cuda.is_bf16_supported()
    scaler = torch.amp.GradScaler(device.type, enabled=fast and not bf16)
    dtype = torch.bfloat16 if bf16 else torch.float16
    autocast = torch.autocast(device.type, dtype=dtype, enabled=fast)
    images = torch.randn(batch_size, 3, image_size, image_size, device=device)
    images = images.contiguous(memory_format=memory_format)
    labels = torch.randint(1000, (batch_size,), device=device)

    def one_step() -> None:
        with autocast:
            loss = F.cross_entropy(step_model(images), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    return one_step


def synchronize(device_type: str) -> None:
    if device_type == "cuda":
        import torch

        torch.cuda.synchronize()


def images_per_s(
    one_step: Callable[[], None], batch_size: int, steps: int, warmup: int, device_type: str
) -> float:
    for _ in range(warmup):  # compilation, cudnn autotuning, allocator warm-up
        one_step()
    synchronize(device_type)
    start = time.perf_counter()
    for _ in range(steps):
        one_step()
    synchronize(device_type)
    return steps * batch_size / (time.perf_counter() - start)


# DDP's logger reads CUDA events (a device sync) at each of its first iterations (and every
# 100th): a warm-up shorter than that puts a sync into the timed window of the DDP loop only.
DDP_SAMPLED_ITERATIONS = 10


def alternating_images_per_s(
    loops: dict[str, Callable[[], None]],
    batch_size: int,
    steps: int,
    warmup: int,
    device_type: str,
    rounds: int = 3,
) -> dict[str, list[float]]:
    """Each loop's images/s in `rounds` windows of `steps`, the loops taking turns, so that clock
    and neighbour drift and whatever ran before hit every loop alike (best of the rounds wins)."""
    for one_step in loops.values():
        images_per_s(one_step, batch_size, 1, max(warmup, DDP_SAMPLED_ITERATIONS + 1), device_type)
    rates: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(rounds):
        for name, one_step in loops.items():
            rates[name].append(images_per_s(one_step, batch_size, steps, 0, device_type))
    return rates


def bench_gpu(
    model_name: str,
    batch_size: int,
    image_size: int,
    steps: int,
    *,
    warmup: int = 20,
    device_type: str = "cuda",
) -> dict:
    import torch

    if device_type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("gpu: CUDA is not available here (--device cpu runs the loops on the CPU)")

    shape, where = (model_name, batch_size, image_size), {"device_type": device_type}

    def measure(*, fast: bool, compile_mode: str | None, ddp: bool) -> float:
        one_step = train_step(*shape, fast=fast, compile_mode=compile_mode, ddp=ddp, **where)
        return images_per_s(one_step, batch_size, steps, warmup, device_type)

    naive = measure(fast=False, compile_mode=None, ddp=False)
    defaults = measure(fast=True, compile_mode="default", ddp=False)
    # DDP overhead: the same eager fast loop with and without a one-process DDP wrapper, both
    # built in the same process group, warmed up alike, then timed in alternating windows.
    with group_of_one(device_type) as backend:
        loops = {
            "plain": train_step(*shape, fast=True, compile_mode=None, ddp=False, **where),
            "ddp": train_step(*shape, fast=True, compile_mode=None, ddp=True, **where),
        }
        rates = alternating_images_per_s(loops, batch_size, steps, warmup, device_type)
    plain, ddp_one = max(rates["plain"]), max(rates["ddp"])
    on_gpu = device_type == "cuda"
    result = {
        "benchmark": f"{device_type}: {model_name}, batch {batch_size}, {image_size}px, one device",
        "device": torch.cuda.get_device_name(0) if on_gpu else platform.processor() or "cpu",
        "torch": torch.__version__,
        "steps": steps,
        "warmup": warmup,
        "ddp_backend": backend,
        "images_per_s_naive_fp32_eager": round(naive, 1),
        "images_per_s_defaults": round(defaults, 1),
        "speedup_defaults_vs_naive": round(defaults / naive, 3),
        "images_per_s_plain": round(plain, 1),
        "images_per_s_ddp_1proc": round(ddp_one, 1),
        "ddp_rounds": {name: [round(r, 1) for r in values] for name, values in rates.items()},
        "ddp_overhead_percent": round(100 * (1 - ddp_one / plain), 2),
    }
    return result


@contextmanager
def group_of_one(device_type: str) -> Iterator[str]:
    """A process group of this process alone (NCCL on a GPU, gloo on a CPU), for DDP; its
    backend."""
    import torch.distributed as dist

    backend = "nccl" if device_type == "cuda" else "gloo"
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield backend
    finally:
        dist.destroy_process_group()


def bench_compile(
    model_name: str,
    batch_size: int,
    image_size: int,
    steps: int,
    device_type: str,
    mode: str = "default",
    ddp: bool = False,
) -> dict:
    import torch
    from torch._dynamo.utils import counters

    if device_type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("compile: CUDA is not available here (--device cpu compiles for the CPU)")
    shape = (model_name, batch_size, image_size)
    with group_of_one(device_type) if ddp else nullcontext():
        one_step = train_step(*shape, fast=True, compile_mode=mode, ddp=ddp,
                              device_type=device_type)  # fmt: skip

        def step_s() -> float:
            start = time.perf_counter()
            one_step()
            synchronize(device_type)
            return time.perf_counter() - start

        synchronize(device_type)
        first = step_s()  # traced, compiled (or loaded from the cache), then run
        # The next ones also record the CUDA graphs of the modes that have them.
        later = [step_s() for _ in range(steps)]
        rate = images_per_s(one_step, batch_size, steps, 0, device_type)
    return {
        "benchmark": f"compile: {model_name}, batch {batch_size}, {image_size}px, {device_type}, "
        f"mode {mode}{', DDP (one process)' if ddp else ''}",
        "torch": torch.__version__,
        "mode": mode,
        "ddp": ddp,
        "cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
        "first_step_s": round(first, 3),
        "later_step_s": round(statistics.median(later), 4),
        "images_per_s": round(rate, 1),
        # Inductor's FX graph cache and AOTAutograd's cache, hits and misses so far.
        "cache": {
            name: int(counters[group][name])
            for group, kind in (("inductor", "fxgraph"), ("aot_autograd", "autograd"))
            for name in (f"{kind}_cache_hit", f"{kind}_cache_miss")
        },
        # Skipped: graphs on a GPU that a mode with CUDA graphs ran without them.
        "cudagraphs": {
            **cuda_graph_trees(),
            "skipped": int(counters["inductor"]["cudagraph_skips"]),
        },
    }


def cuda_graph_trees() -> dict[str, int]:
    """What ran in CUDA graphs (Inductor's CUDA graph trees on the first GPU): the compiled graphs
    that did, and how many recordings that took (more than one a graph: re-recorded). None on a
    CPU, where a mode with CUDA graphs compiles as the default, saying nothing."""
    from torch._inductor import cudagraph_trees

    manager = cudagraph_trees.get_manager(0, create_if_none_exists=False)
    if manager is None:
        return {"graphs": 0, "recordings": 0}
    return {"graphs": len(manager.ids_to_funcs), "recordings": next(manager.graph_counter)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["gpu", "compile"])
    parser.add_argument("--model", default="resnet18", help="gpu/compile: model")
    parser.add_argument("--batch-size", type=int, default=128, help="gpu/compile: batch per step")
    parser.add_argument("--image-size", type=int, default=224, help="gpu/compile: image side")
    parser.add_argument("--steps", type=int, default=100, help="gpu/compile: timed steps")
    parser.add_argument("--warmup", type=int, default=20, help="gpu: untimed steps per variant")
    parser.add_argument(
        "--device", choices=["cuda", "cpu"], default="cuda", help="gpu/compile: where to run"
    )
    parser.add_argument(
        "--compile-mode", choices=["default", "reduce-overhead", "max-autotune"],
        default="default", help="compile: torch.compile's mode",
    )  # fmt: skip
    parser.add_argument("--ddp", action="store_true", help="compile: the example's DDP wrap")
    args = parser.parse_args()
    if min(args.batch_size, args.image_size, args.steps) < 1 or args.warmup < 0:
        parser.error("--batch-size, --image-size, --steps must be >= 1; --warmup >= 0")
    shape = (args.model, args.batch_size, args.image_size, args.steps)
    if args.what == "gpu":
        result = bench_gpu(*shape, warmup=args.warmup, device_type=args.device)
    else:
        result = bench_compile(*shape, args.device, args.compile_mode, args.ddp)
    result["python"] = platform.python_version()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
