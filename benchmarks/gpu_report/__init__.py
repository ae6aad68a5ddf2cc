"""The GPU report: one command that proves a CUDA machine (`make gpu-report`, docs/gpu-report.md).

It runs, as child processes of a report process that itself never touches the GPU: the `gpu`
test marker, `torchrig verify --json` quick and full, torch.compile cold and warm, the training
benchmark (the example's defaults against a naive fp32 loop, DDP with one process against none),
an FSDP2 run of the training example killed after a checkpoint and resumed, and a checkpoint
save/load against the raw disk. Each figure is set beside its target; report.json and report.md
land in one folder with every log. `--cpu` runs the same pipeline on a CPU with tiny sizes, so CI
keeps it working.

Modules: cli (arguments, order, the report), parts (each part's commands), resume (the kill and
resume experiment), smi (nvidia-smi against NVML), readers (parsing children's output), targets
(the verdicts), render (markdown), machine (what the machine is), procs (child processes).
"""
