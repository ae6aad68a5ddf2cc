"""What this machine is and gives a training job, read once and judged once (docs/architecture.md).

Standard library only: the banner imports this at every container start and must never pull in
torch; pynvml is imported inside the function that reads NVML.
"""
