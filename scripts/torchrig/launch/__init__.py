"""`torchrig launch`: torchrun with the defaults people forget, on one machine or many.

It is torchrun, not a replacement: torchrun's c10d rendezvous does the joining, and every torchrun
flag passes through unchanged. What this package adds, one module each:

- `torchrun`: torchrun's own flags, passed through in order, and what they imply (one node or many).
- `environment`: what a scheduler already said in the environment (Kubeflow's `PET_*`), so an
  explicit default from us never overrides it.
- `plan`: the local plan: process count (one per visible GPU; on a CPU a few), `--standalone` on
  one machine, `--max-restarts 3`, threads per rank, NCCL's async error handling and a collective
  timeout; a pure function from the request and the machine's facts to a command line.
- `cli`: the command: parse, plan, print the torchrun command line, become it.

Standard library only at import time; GPUs are counted when the command runs.
"""
