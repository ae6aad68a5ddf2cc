"""What this machine is and gives a training job, read once and judged once (docs/architecture.md).
Standard library only: the banner imports it at every start; pynvml is imported where NVML is read.
"""
