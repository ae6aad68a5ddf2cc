"""What a scheduler already said in the environment, so that launch's defaults never override it.

torchrun reads every one of its flags from a `PET_<FLAG>` variable when the flag is not on the
command line (`PET_NNODES`, `PET_NPROC_PER_NODE`, `PET_MASTER_ADDR`, ...). Kubeflow's Trainer
(TrainJob) and training-operator (PyTorchJob) set exactly those in every pod. A flag that launch
adds as a default would win over them, so the plan leaves out whatever the environment sets.
"""

from __future__ import annotations

from collections.abc import Mapping

PREFIX = "PET_"


def pet_variable(flag: str) -> str:
    """'--nproc-per-node' -> 'PET_NPROC_PER_NODE' (torchrun's own naming rule)."""
    return PREFIX + flag.lstrip("-").replace("-", "_").upper()


def set_by_environment(flag: str, environ: Mapping[str, str]) -> str | None:
    """The value torchrun will take for `flag` from the environment, or None."""
    value = environ.get(pet_variable(flag), "").strip()
    return value or None


def multi_node_by_environment(environ: Mapping[str, str]) -> bool:
    """A scheduler asked for more than one node, or named a rendezvous on another machine."""
    for flag in ("--master-addr", "--rdzv-endpoint", "--node-rank"):
        if set_by_environment(flag, environ) is not None:
            return True
    nnodes = set_by_environment("--nnodes", environ)
    return nnodes is not None and nnodes not in ("1", "1:1")
