"""A user's plain torch.distributed script, as people write them: no destroy_process_group, no
torchrig. The tests start it under `torchrig launch` and plain `torchrun` and make it fail on
purpose, one way at a time:

    plain_dist.py OUT [--kill-rank R] [--raise-rank R] [--exit-rank R CODE] [--teardown-rank R]

Every rank appends "start <rank> <round>" to OUT/runs.log when it starts (so a test counts how
often the job ran) and, at the end, writes OUT/result-<rank>.txt through a file it leaves open.
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--kill-rank", type=int, help="SIGKILL this rank in round 0, mid-job")
parser.add_argument("--raise-rank", type=int, help="this rank raises RuntimeError")
parser.add_argument("--exit-rank", type=int, nargs=2, metavar=("RANK", "CODE"))
parser.add_argument("--teardown-rank", type=int, help="this rank dies in Python's teardown")
args = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
with open(os.path.join(args.out, "runs.log"), "a") as runs:
    runs.write(f"start {rank} {restart}\n")

total = torch.ones(1)
dist.all_reduce(total)
if rank == args.kill_rank and restart == 0:
    os.kill(os.getpid(), 9)
if rank == args.raise_rank:
    raise RuntimeError(f"rank {rank} failed on purpose")
if args.exit_rank and rank == args.exit_rank[0]:
    sys.exit(args.exit_rank[1])
dist.all_reduce(total)


class DiesInTeardown:
    """Aborts the process when Python clears this module at exit: a C++ destructor's abort,
    on purpose and every time."""

    def __del__(self):
        os.abort()


if rank == args.teardown_rank:
    dies = DiesInTeardown()  # made before the results file, so it is cleared first
results = open(os.path.join(args.out, f"result-{rank}.txt"), "w")  # noqa: SIM115 (left open)
results.write(f"rank {rank} of {dist.get_world_size()}: {total.item():g} in round {restart}\n")
print(f"rank {rank} done in round {restart}", flush=True)
