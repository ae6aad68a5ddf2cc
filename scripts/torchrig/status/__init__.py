"""`torchrig status`: one screen (or `--json`) of the GPUs, their processes, the running torchrun
jobs and each job's last checkpoint. Standard library only at import time."""
