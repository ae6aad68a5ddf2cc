"""The shape of PyTorch's DDP tutorial: `python spawn_ddp.py OUT`, mp.spawn starts the workers,
each sets MASTER_ADDR/MASTER_PORT itself, trains a step with DDP and cleans up. Started with plain
python (over SSH): it must find no torchrun variables in its environment.

    spawn_ddp.py OUT [--teardown-rank R] [--raise-rank R]

With --teardown-rank, that worker dies in Python's teardown after its work, every time (what
gloo's threads make happen by chance), and leaves OUT/left-open-<R>.txt written but not closed.
With --raise-rank, that worker raises RuntimeError.
"""

import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def setup(rank: int, world_size: int, port: int) -> None:
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def cleanup() -> None:
    dist.destroy_process_group()


class DiesInTeardown:
    """Aborts the process when Python clears this module at exit, as a C++ destructor would. The
    abort is bound now: by then the `os` module may be cleared already."""

    def __del__(self, abort=os.abort):
        abort()


def demo_basic(
    rank: int, world_size: int, port: int, out: str, teardown_rank: int, raise_rank: int
) -> None:
    if rank == raise_rank:
        raise RuntimeError(f"rank {rank} failed on purpose")
    if rank == teardown_rank:
        globals()["dies"] = DiesInTeardown()  # lives until the module is cleared
        left_open = open(os.path.join(out, f"left-open-{rank}.txt"), "w")  # noqa: SIM115
        left_open.write(f"rank {rank} left this open\n")
        globals()["left_open"] = left_open
    setup(rank, world_size, port)
    model = DDP(torch.nn.Linear(10, 5))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
    optimizer.zero_grad()
    model(torch.randn(20, 10)).sum().backward()
    optimizer.step()
    with open(os.path.join(out, f"result-{rank}.txt"), "w") as result:
        result.write(f"rank {rank} of {dist.get_world_size()}\n")
    cleanup()


if __name__ == "__main__":
    leaked = [name for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE") if name in os.environ]
    if leaked:
        sys.exit(f"torchrun's variables in a plain python's environment: {leaked}")
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--teardown-rank", type=int, default=-1)
    parser.add_argument("--raise-rank", type=int, default=-1)
    args = parser.parse_args()
    world_size = 2
    mp.spawn(
        demo_basic,
        args=(world_size, free_port(), args.out, args.teardown_rank, args.raise_rank),
        nprocs=world_size,
        join=True,
    )
    print("spawn done")
