"""`torchrig status`: one screen (or `--json`) of the GPUs, their processes, the running torchrun
jobs. Standard library only at import time."""
