"""The library a training script calls each step: `distributed` (a process group that survives
torchrun's restarts, DDP and FSDP2), `data` (a resumable sampler, synthetic images), `models`
(`build_model`). `from torchrig import data, distributed, models` reaches them too."""
