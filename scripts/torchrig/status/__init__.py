"""`torchrig status`: one screen of the GPUs, their processes, the running torchrun jobs and each
job's last checkpoint; `--json` for scripts.

- `jobs`: the torchrun agents and their workers, from /proc, and the checkpoint directory their
  CheckpointManager recorded (torchrig.checkpoint.location).
- `report`: GPUs from `torchrig.facts.nvml`, last checkpoints from `CheckpointManager.list`, put
  together into one dict and rendered as text.
- `cli`: the command.

For a live, interactive view of the GPUs and their processes, run `nvitop`; this is the snapshot
for a glance or a script. Standard library only at import time.
"""
