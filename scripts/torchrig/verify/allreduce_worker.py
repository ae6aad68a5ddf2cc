"""One rank of the all-reduce probe: in the parent's store file (--rank, --world, --store), or in
torchrun's group (`torchrig launch --hostfile FILE -m torchrig.verify.allreduce_worker`, across
hosts); rank 0 prints the sweep as one JSON line."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from typing import Any

from torchrig.shared.voice import MIB
from torchrig.train.distributed import init_distributed, shutdown_distributed


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="allreduce_worker")
    parser.add_argument("--rank", type=int, help="without: under torchrun, from its variables")
    parser.add_argument("--world", type=int)
    parser.add_argument("--store", help="the store file the parent made the folder for")
    parser.add_argument("--backend", choices=("nccl", "gloo"), required=True)
    parser.add_argument("--device", type=int, default=-1, help="CUDA device index (NCCL)")
    parser.add_argument("--sizes", required=True, help="comma-separated message sizes in bytes")
    parser.add_argument("--timeout", type=float, required=True)
    args = parser.parse_args(argv)
    given = [name for name in ("rank", "world", "store") if getattr(args, name) is not None]
    if given and len(given) < 3:
        parser.error("--rank, --world and --store go together (or none of them, under torchrun)")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    import torch
    import torch.distributed as dist

    rank, world, device = join_group(torch, dist, args)
    try:
        sweep = [
            measure(torch, dist, device, size, rank, world)
            for size in (int(part) for part in args.sizes.split(","))
        ]
    except BaseException:
        dist.destroy_process_group()
        raise
    # Together: a rank leaving first could abort a peer's gloo threads, a false FAIL.
    shutdown_distributed()
    if rank == 0:
        print(json.dumps({"world": world, "backend": args.backend, "sweep": sweep}), flush=True)
    return 0


def join_group(torch: Any, dist: Any, args: argparse.Namespace) -> tuple[int, int, Any]:
    """(rank, world size, device) in the parent's group, or in torchrun's without --rank."""
    if args.rank is None:
        info = init_distributed("cuda" if args.backend == "nccl" else "cpu", args.backend)
        device = torch.device("cuda", info.local_rank) if args.backend == "nccl" else None
        return info.rank, info.world_size, device or torch.device("cpu")
    timeout = datetime.timedelta(seconds=args.timeout)
    device = torch.device("cpu")
    if args.backend == "nccl":
        device = torch.device("cuda", args.device)
        torch.cuda.set_device(device)
    store = dist.FileStore(args.store, args.world)
    dist.init_process_group(
        args.backend, store=store, rank=args.rank, world_size=args.world, timeout=timeout
    )
    return args.rank, args.world, device


def synchronize(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(torch: Any, dist: Any, device: Any, size: int, rank: int, world: int) -> dict[str, Any]:
    count = max(1, size // 4)
    # Small integers in fp32 add up exactly, so the check can demand equality.
    pattern = torch.arange(count, device=device, dtype=torch.float32).remainder_(7).add_(1)
    values = pattern * (rank + 1)
    dist.all_reduce(values)
    expected = pattern * (world * (world + 1) // 2)
    correct = torch.equal(values, expected)

    # Zeros stay zeros however often they are summed, so timing never overflows.
    buffer = torch.zeros(count, device=device, dtype=torch.float32)
    dist.all_reduce(buffer)
    # Enough repetitions to average out launch noise on small messages, few on large ones.
    iterations = 20 if size <= MIB else 8
    synchronize(torch, device)
    begin = time.perf_counter()
    for _ in range(iterations):
        dist.all_reduce(buffer)
    synchronize(torch, device)
    seconds = (time.perf_counter() - begin) / iterations

    # The slowest rank sets the pace; every rank must have seen the right values.
    summary = torch.tensor([seconds, 0.0 if correct else 1.0], device=device, dtype=torch.float64)
    dist.all_reduce(summary, op=dist.ReduceOp.MAX)
    seconds, wrong = float(summary[0]), bool(summary[1])
    bytes_moved = count * 4
    algbw = bytes_moved / seconds / 1e9
    return {
        "bytes": bytes_moved,
        "iterations": iterations,
        "time_us": seconds * 1e6,
        "algbw_gbps": algbw,
        # nccl-tests' bus bandwidth: what each link carries in a ring all-reduce.
        "busbw_gbps": algbw * 2 * (world - 1) / world,
        "correct": not wrong,
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
