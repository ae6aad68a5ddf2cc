"""The measurements behind docs/benchmarks.md, each run from the repository's root as
`python -m benchmarks.<name>` (`PYTHONPATH=scripts` where torchrig is not installed):
`launcher` (torchrig launch against torchrun), `checkpoint_io` (checkpoint saves and loads
against raw disk I/O), `train_throughput` (the example's defaults, DDP's cost, torch.compile's
modes) and `gpu_report` (`make gpu-report`). They import the package and `testbed/`, never
`tests/`."""
