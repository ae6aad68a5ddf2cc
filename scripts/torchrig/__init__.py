"""torchrig: helpers for a PyTorch multi-GPU workstation in a container."""

__version__ = "0.1.0"
