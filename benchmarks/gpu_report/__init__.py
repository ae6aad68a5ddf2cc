"""The GPU report (`make gpu-report`, docs/gpu-report.md): one command that proves a CUDA machine.

It does no check of its own: it runs what the project already has, as children within each
part's time budget and the report's (7 minutes on one H100 in all), and sets their figures beside
the targets:
- verify: `torchrig verify --json`, --quick and full, timed, every verdict, the one-GPU NCCL
  all-reduce; verify's bf16/fp16 matmul and triad method against a plain torch loop in one
  process (verify_figures.py), the published runs beside them;
- compile: torch.compile's first step from a cold cache, then again from the same cache;
- training: the example's defaults against a naive fp32 loop, DDP with one process against none
  (benchmarks/train_throughput.py);
- resume: the training example (FSDP2, sharded checkpoints) killed after its first checkpoint and
  resumed, against the same run left alone: the loss curves and the final weights;
- checkpoint: CheckpointManager against raw disk I/O (benchmarks/checkpoint_io.py);
- tests: `pytest -m gpu tests/gpu`, among them NVML's verdicts against nvidia-smi's;
- modes: the example's step (its DDP wrap and its own model) in each torch.compile mode it offers
  (default, reduce-overhead, max-autotune): images/s, the first step's compile, and whether
  every graph ran in CUDA graphs (benchmarks/train_throughput.py compile).
`--cpu` runs it all on a CPU with tiny sizes (CI keeps it working so); figures are then shown, not
judged.

Its modules: `__main__` the command (the parts in order, the report written after each);
`runner` how a child runs (budgets, live logs, one part); `parts` what each part runs and the
figures it reads back; `targets` the figures judged; `render` report.json and report.md;
`verify_figures` the measurement of its own that a part runs as a child. Nothing is imported
here, so that `python -m benchmarks.gpu_report.<child>` loads only its child.
"""
