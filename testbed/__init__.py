"""What the tests and the benchmarks both stand on, outside the torchrig package: emulated
machines on this one (containers of the image as nodes, a Slurm cluster of local daemons) and the
training example with the knobs its tests need (traced_train.py). Never part of the image."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
