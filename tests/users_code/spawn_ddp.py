"""The shape of PyTorch's DDP tutorial: `python spawn_ddp.py OUT`, mp.spawn starts the workers,
each sets MASTER_ADDR/MASTER_PORT itself, trains a step with DDP and cleans up. Started with plain
python (over SSH): it must find no torchrun variables in its environment.
"""

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


def demo_basic(rank: int, world_size: int, port: int, out: str) -> None:
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
    world_size = 2
    mp.spawn(demo_basic, args=(world_size, free_port(), sys.argv[1]), nprocs=world_size, join=True)
    print("spawn done")
