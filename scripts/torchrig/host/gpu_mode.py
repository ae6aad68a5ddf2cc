"""GPUs or CPU mode: decided here alone, once per `make up` (`decide`), from the CPU setting and
what this machine has; `choose_mode` is a pure function of the facts read apart. The other
targets need no mode: compose runs them the same either way, and CPU mode's one difference,
docker-compose.cpu.yml, matters only where the container is made.

The engine registers its `nvidia` device driver whenever it finds the toolkit's hook on its PATH,
so a machine with the hook alone (no `nvidia` runtime) works and must not be refused.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from torchrig.host.compose_failure import engine_error, no_toolkit_lines
from torchrig.host.workstations import Compose
from torchrig.shared.voice import CannotGoOn

CPU_OVERRIDE = "docker-compose.cpu.yml"
NVIDIA_RUNTIME = "nvidia"
NVIDIA_HOOK = "nvidia-container-runtime-hook"
# Where a package puts the hook; the engine, started by init, looks in these whatever our PATH.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class HostGpus:
    """What this machine shows of NVIDIA GPUs and their container toolkit."""

    device_nodes: tuple[str, ...]  # /dev/nvidia0, /dev/nvidiactl, ...
    nvidia_smi: str | None  # its path, or None
    hook: str | None  # nvidia-container-runtime-hook's path, or None

    @property
    def has_gpus(self) -> bool:
        # nvidia-smi without device nodes still counts: the driver creates the nodes on first use
        # (nvidia-modprobe), so a server that has not run CUDA since boot may have none yet.
        return bool(self.device_nodes or self.nvidia_smi)


@dataclass(frozen=True)
class Mode:
    cpu: bool
    # Said before the start, loudly: why this mode was chosen and how to change it.
    notice: tuple[str, ...] = ()


def parse_cpu_setting(value: str) -> bool | None:
    """CPU=1 -> True (CPU mode), CPU=0 -> False (GPUs), unset or empty -> None (decide)."""
    text = value.strip()
    if text in ("", "0", "1"):
        return None if text == "" else text == "1"
    raise CannotGoOn(
        f"CPU={value!r} is not 0 or 1: `make up CPU=1` starts without GPUs, `make up CPU=0` "
        "insists on GPUs, and without CPU `make up` chooses from what this machine has."
    )


def needs_engine_runtimes(forced: bool | None, host: HostGpus) -> bool:
    """Only a machine with GPUs and no forced choice needs to ask the engine (it costs a call)."""
    return forced is None and host.has_gpus


def choose_mode(forced: bool | None, host: HostGpus, runtimes: frozenset[str] | None) -> Mode:
    """The mode to start in; `runtimes` is None where `needs_engine_runtimes` said no."""
    if forced is not None:
        return Mode(cpu=forced)
    if not host.has_gpus:
        return Mode(cpu=True, notice=CPU_MODE_NOTICE)
    if runtimes is not None and NVIDIA_RUNTIME not in runtimes and host.hook is None:
        known = ", ".join(sorted(runtimes)) or "none"
        evidence = ", ".join([*host.device_nodes[:3], *(["nvidia-smi"] if host.nvidia_smi else [])])
        raise CannotGoOn(
            *no_toolkit_lines(
                f"this machine has NVIDIA GPUs ({evidence}), but Docker cannot hand "
                f"them to containers: it has no `{NVIDIA_RUNTIME}` runtime (it has: {known}) "
                f"and {NVIDIA_HOOK} is not installed."
            )
        )
    return Mode(cpu=False)


CPU_MODE_NOTICE = (
    "CPU mode: no NVIDIA GPU on this machine (no /dev/nvidia* device, no nvidia-smi), so the "
    "workstation starts without GPUs.",
    "  To use GPUs: install the NVIDIA driver and the NVIDIA Container Toolkit (README: "
    "Prerequisites), then `make up` again. CPU=1 or CPU=0 forces either mode.",
)


def decide(cpu_setting: str, compose: Compose) -> tuple[Mode, Compose]:
    """The mode to start in, and the compose command for it (CannotGoOn with what to do when
    neither mode can start)."""
    forced = parse_cpu_setting(cpu_setting)
    host = read_host_gpus()
    runtimes = None
    if needs_engine_runtimes(forced, host):
        info = compose.docker("info", "--format", "{{json .Runtimes}}")
        if info.returncode != 0:
            raise engine_error("info", info.stderr.strip())
        runtimes = parse_runtimes(info.stdout)
    mode = choose_mode(forced, host, runtimes)
    return mode, compose.with_file(CPU_OVERRIDE) if mode.cpu else compose


def read_host_gpus(
    dev: Path = Path("/dev"), which: Callable[..., str | None] = shutil.which
) -> HostGpus:
    search = os.pathsep.join(filter(None, (os.environ.get("PATH"), SYSTEM_PATH)))
    return HostGpus(
        device_nodes=tuple(sorted(str(path) for path in dev.glob("nvidia*"))),
        nvidia_smi=which("nvidia-smi", path=search),
        hook=which(NVIDIA_HOOK, path=search),
    )


def parse_runtimes(info_json: str) -> frozenset[str]:
    """The runtime names in `docker info --format '{{json .Runtimes}}'`."""
    runtimes = json.loads(info_json or "null")
    return frozenset(runtimes) if isinstance(runtimes, dict) else frozenset()
