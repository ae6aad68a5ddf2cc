"""The local plan: from what the user asked and what the machine has to a torchrun command line.

`build_plan` is pure, so every default is tested without starting anything; a scheduler's `PET_*`
variables (Kubeflow sets them in every pod) are never overridden by a default."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from torchrig.facts import nvml
from torchrig.facts.children import module_command
from torchrig.facts.nvml import NvmlSnapshot
from torchrig.facts.visible import CUDA_VISIBLE, visible_devices
from torchrig.launch import network
from torchrig.launch.network import Reach, Route, exposure_warning, unreachable_message
from torchrig.launch.options import (
    DEFAULT_MAX_RESTARTS,
    MAX_CPU_PROCESSES,
    NPROC_WORDS,
    LaunchError,
    LaunchRequest,
)
from torchrig.launch.torchrun import TorchrunFlags, conf_with
from torchrig.pth.rank_exit import TORCHRUN_MODULE
from torchrig.train.distributed import DEFAULT_TIMEOUT_S, TIMEOUT_ENV

# torch 2.13-2.15: with the workers sharing the agent's rendezvous store, a restart round finds
# the keys of the round before (one machine: "Gloo connectFullMesh failed", or a hang), and a node
# that rejoins after the job shrank waits for a MASTER_ADDR the surviving rank 0 never writes again.
# With a store per round (this variable), both work. The image sets it for plain torchrun too.
SHARED_STORE_BUG_FIX = ("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
# Both libraries pick an interface by their own rules unless told; in a container or on a machine
# with several networks that is often one the other nodes cannot reach.
SOCKET_INTERFACE_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
# One machine: torch's c10d rendezvous keeps its state, which torchrun's agent unpickles, in a file
# only this user may write (torch makes it with mkstemp) instead of a TCP store, which would listen
# on every interface whatever address it is given. The workers meet on loopback: their own store
# (addresses and counters, never unpickled) at this address, gloo and NCCL on this interface.
LOOPBACK = Route("127.0.0.1", "lo")
# One folder per GPU, wherever the NVIDIA driver is loaded (also without NVML's library).
DRIVER_GPUS = Path("/proc/driver/nvidia/gpus")
FILE_STORE = ("store_type", "file")


def pet_variable(flag: str) -> str:
    """'--nproc-per-node' -> 'PET_NPROC_PER_NODE' (torchrun's own naming rule)."""
    return "PET_" + flag.lstrip("-").replace("-", "_").upper()


def set_by_environment(flag: str, environ: Mapping[str, str]) -> str | None:
    """The value torchrun will take for `flag` from the environment, or None."""
    return environ.get(pet_variable(flag), "").strip() or None


def multi_node_by_environment(environ: Mapping[str, str]) -> bool:
    """A scheduler asked for more than one node, or named a rendezvous on another machine."""
    elsewhere = ("--master-addr", "--rdzv-endpoint", "--node-rank")
    if any(set_by_environment(flag, environ) for flag in elsewhere):
        return True
    return set_by_environment("--nnodes", environ) not in (None, "1", "1:1")


@dataclass
class LaunchPlan:
    argv: list[str]
    env_updates: dict[str, str]
    # torchrun gets launch's default of no restarts (neither the flag nor PET_MAX_RESTARTS).
    restarts_defaulted: bool = False
    exposure: str | None = None  # the warning for a machine with a public address

    def display(self) -> str:
        assignments = [f"{key}={shlex.quote(value)}" for key, value in self.env_updates.items()]
        return " ".join([*assignments, shlex.join(self.argv)])


def count_visible_gpus(
    environ: Mapping[str, str],
    read_inventory: Callable[[], NvmlSnapshot] | None = None,
    driver_gpus: Path = DRIVER_GPUS,
) -> int:
    """The GPUs CUDA will expose to the workers: NVML's, through CUDA_VISIBLE_DEVICES by CUDA's
    rules; without NVML the variable's entries, else the GPUs the driver lists."""
    inventory = (read_inventory or nvml.read_inventory)()
    uuids = [gpu.uuid for gpu in inventory.gpus] if inventory.available else None
    visible = visible_devices(environ.get(CUDA_VISIBLE), uuids)
    if visible is not None:
        return len(visible)
    try:
        return len(os.listdir(driver_gpus))
    except OSError:  # no NVIDIA driver here
        return 0


def choose_nproc(requested: str | None, gpu_count: int, cpu_count: int) -> int:
    choice = requested or "auto"
    if choice.isdigit():
        return int(choice)
    if choice == "gpu" or (choice == "auto" and gpu_count > 0):
        if gpu_count == 0:
            raise LaunchError("--nproc-per-node gpu: no GPU is visible (check nvidia-smi)")
        return gpu_count
    return max(1, min(MAX_CPU_PROCESSES, cpu_count))


def nproc_from_environment(environ: Mapping[str, str]) -> str | None:
    """PET_NPROC_PER_NODE as torchrun would take it, checked here so a typo fails before start."""
    value = set_by_environment("--nproc-per-node", environ)
    if value is None:
        return None
    if value in NPROC_WORDS or (value.isdigit() and int(value) >= 1):
        return value
    variable = pet_variable("--nproc-per-node")
    raise LaunchError(f"{variable}={value!r}: expected a whole number >= 1, auto, gpu or cpu")


def plan_here(request: LaunchRequest, environ: Mapping[str, str]) -> LaunchPlan:
    """The plan for this machine: the script checked, the GPUs counted when the process count
    depends on them, the rendezvous reached, then the command line (`build_plan`) and the
    warning for a public address."""
    check_script(request)
    choice = request.nproc_per_node or nproc_from_environment(environ)
    gpus = count_visible_gpus(environ) if choice in (None, "auto", "gpu") else 0
    route = check_rendezvous(request.torchrun)
    made = build_plan(request, environ, gpus, os.cpu_count() or 1, route)
    made.exposure = exposure_here(request.torchrun, environ)
    return made


def check_script(request: LaunchRequest) -> None:
    if not request.torchrun.script_is_a_file:
        return  # a module name or an executable on PATH, not a file here
    path = Path(request.script)
    if not path.is_file():
        raise LaunchError(f"{request.script}: no such file (give the training script's path)")


def build_plan(
    request: LaunchRequest,
    environ: Mapping[str, str],
    gpu_count: int,
    cpu_count: int,
    route: Route | None = None,
) -> LaunchPlan:
    """The torchrun command line and the environment it needs. `route`: this machine's way to a
    multi-node launch's rendezvous endpoint (`check_rendezvous`), if known."""
    nproc_env = nproc_from_environment(environ)
    nproc = choose_nproc(request.nproc_per_node or nproc_env, gpu_count, cpu_count)
    argv = module_command(sys.executable, TORCHRUN_MODULE)
    flags = request.torchrun
    multi_node = flags.multi_node or multi_node_by_environment(environ)
    if not multi_node:
        one_machine, flags = one_machine_rendezvous(flags, environ)
        argv += one_machine
    if request.nproc_per_node is not None or nproc_env is None:
        argv += ["--nproc-per-node", str(nproc)]
    if request.max_restarts is not None:
        argv += ["--max-restarts", str(request.max_restarts)]
    elif set_by_environment("--max-restarts", environ) is None:
        argv += ["--max-restarts", str(DEFAULT_MAX_RESTARTS)]
    argv += rendezvous_defaults(flags, environ, route)
    argv += [*flags.argv(), request.script, *request.script_args]
    env = worker_environment(request, environ, nproc, cpu_count)
    env.update(socket_interfaces(environ, route if multi_node else LOOPBACK))
    defaulted = (
        request.max_restarts is None and set_by_environment("--max-restarts", environ) is None
    )
    return LaunchPlan(argv=argv, env_updates=env, restarts_defaulted=defaulted)


def rendezvous_defaults(
    flags: TorchrunFlags, environ: Mapping[str, str], route: Route | None
) -> list[str]:
    """c10d for an endpoint given without a backend (torchrun's default, static, is not
    elastic), and the address that routes to the endpoint as this node's --local-addr."""
    if flags.rdzv_endpoint is None:
        return []
    argv = []
    backend = flags.rdzv_backend or set_by_environment("--rdzv-backend", environ)
    if backend is None and not flags.static:
        argv += ["--rdzv-backend", "c10d"]
    if flags.local_addr is None and route and not route.loopback:
        argv += ["--local-addr", route.address]
    return argv


def one_machine_rendezvous(
    flags: TorchrunFlags, environ: Mapping[str, str]
) -> tuple[list[str], TorchrunFlags]:
    """The flags for a rendezvous on this machine alone (LOOPBACK), and the user's flags left to
    pass on; a backend other than c10d is the user's own choice, left as it is."""
    backend = flags.rdzv_backend or set_by_environment("--rdzv-backend", environ)
    if backend not in (None, "c10d"):
        return [], flags
    given = flags.rdzv_conf or set_by_environment("--rdzv-conf", environ)
    argv = [] if backend else ["--rdzv-backend", "c10d"]
    argv += ["--rdzv-conf", conf_with(given, *FILE_STORE)]
    if flags.local_addr is None:
        argv += ["--local-addr", LOOPBACK.address]
    return argv, flags.without(["--rdzv-conf"])


def socket_interfaces(environ: Mapping[str, str], route: Route | None) -> dict[str, str]:
    """gloo/NCCL on the interface that reaches the endpoint of a multi-node launch, or on
    loopback for one machine alone."""
    env: dict[str, str] = {}
    if route is not None and route.interface and (route is LOOPBACK or not route.loopback):
        for variable in SOCKET_INTERFACE_VARIABLES:
            if variable not in environ:
                env[variable] = route.interface
    return env


def worker_environment(
    request: LaunchRequest, environ: Mapping[str, str], nproc: int, cpu_count: int
) -> dict[str, str]:
    """Variables the workers need that the user's environment does not already set."""
    env: dict[str, str] = {}
    if request.threads is not None:
        env["OMP_NUM_THREADS"] = str(request.threads)
    elif "OMP_NUM_THREADS" not in environ:
        # Each rank's share of the cores; torchrun's own default is 1 thread per rank.
        env["OMP_NUM_THREADS"] = str(max(1, cpu_count // nproc))
    name, value = SHARED_STORE_BUG_FIX
    if name not in environ:
        env[name] = value
    # Without it a failed NCCL collective can hang the job instead of ending it.
    if "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in environ:
        env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1"
    if request.collective_timeout is not None:
        env[TIMEOUT_ENV] = f"{request.collective_timeout:g}"
    elif TIMEOUT_ENV not in environ:
        env[TIMEOUT_ENV] = str(DEFAULT_TIMEOUT_S)
    return env


def check_rendezvous(flags: TorchrunFlags, timeout_s: float = 5.0) -> Route | None:
    """This node's route to the endpoint (None without one). Errors now for what torchrun would
    only report after its 60 s timeout: a name that does not resolve, an endpoint that drops
    connections (a refusal is fine: the endpoint's own launch has not started yet)."""
    endpoint = flags.rdzv_endpoint
    if endpoint is None:
        return None
    route = network.route_to(endpoint.host)
    if route is None:
        raise LaunchError(
            f"--rdzv-endpoint {endpoint}: {endpoint.host!r} does not resolve on this machine: "
            "give its address, or add it to DNS or /etc/hosts"
        )
    is_local = route.loopback or network.resolve(endpoint.host) == route.address
    if not is_local:
        outcome, detail = network.reach(endpoint, timeout_s)
        if outcome == Reach.UNREACHABLE:
            raise LaunchError(unreachable_message(endpoint, detail))
    return route


def exposure_here(flags: TorchrunFlags, environ: Mapping[str, str]) -> str | None:
    """The warning for this machine, when it has a public address; else None."""
    public = network.public_addresses()
    if not public:
        return None
    if not (flags.multi_node or multi_node_by_environment(environ)):
        return exposure_warning("this machine", public, "a free port", across_machines=False)
    where = f"port {flags.rdzv_endpoint.port}" if flags.rdzv_endpoint else "its port"
    ports = f"the rendezvous store on {where} of its host, the workers' store on a free port"
    return exposure_warning("this machine", public, ports)
