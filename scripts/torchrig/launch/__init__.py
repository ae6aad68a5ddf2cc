"""`torchrig launch`: torchrun with the defaults people forget, on one machine or many.

It is torchrun, not a replacement: torchrun's c10d rendezvous does the joining, and every torchrun
flag passes through unchanged. What this package adds, one module each:

- `torchrun`: torchrun's own flags, passed through in order, parsed once (`TorchrunFlags`: one
  node or many, the rendezvous, static or not, a module or a script) and written back.
- `options`: launch's own options, read into a `LaunchRequest` and written back out beside it.
- `environment`: what a scheduler already said in the environment (Kubeflow's `PET_*`), so an
  explicit default from us never overrides it.
- `plan`: the local plan: process count (one per visible GPU; on a CPU a few), `--standalone` on
  one machine, `--max-restarts 0` unless asked, threads per rank, NCCL's async error handling, a
  collective timeout and a rendezvous store per restart round; a pure function
  from the request and the machine's facts to a command line.
- `rendezvous`: a multi-node launch by hand: the endpoint checked before torchrun starts.
- `hosts`: `--hostfile`: each host's share of the request, run by torchrig.multihost.
- `child`: torchrun as launch's child (signals passed on, 75 for a resumable stop).
- `rank_exit`: run by the image's `.pth` line in each torchrun worker and `mp.spawn` child: a rank
  whose script finished ends with its status, not failed by an abort in Python's teardown.
- `cli`: the command: parse, plan, print the torchrun command line, run it.

Standard library only at import time; GPUs are counted when the command runs.
"""
