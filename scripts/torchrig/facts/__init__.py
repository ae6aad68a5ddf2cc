"""What this machine is and gives a training job, read once and judged once.

The one place that reads the GPU and runtime facts and turns them into verdicts, shared by the
container's start-up banner, `torchrig launch` and `torchrig verify`:

- `verdict`: the verdict type (`Check`, `Verdict`) every check returns;
- `nvml`: NVML, opened here and nowhere else, read into a snapshot of plain values;
- `visible`: `CUDA_VISIBLE_DEVICES`, read by CUDA's rules;
- `cuda_compat`: the minimum driver per CUDA version and the "driver too old" verdict;
- `runtime`: /dev/shm, memlock, stack, CPUs and NUMA, and their verdicts;
- `network`: endpoints, routes, reachability;
- `processes`: the process table, the one reader of /proc's processes.

Standard library only, at module level and below: the banner imports this at every container
start and must never pull in torch; pynvml is imported inside the function that reads NVML.
"""
