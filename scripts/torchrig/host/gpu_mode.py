"""GPUs or CPU mode for `make up`: decided from what this machine and its Docker engine have.

`CPU=1` and `CPU=0` force the choice. Left unset:
- no NVIDIA GPU at all (no /dev/nvidia* device, no nvidia-smi): CPU mode, said loudly, with how
  to get GPUs;
- NVIDIA GPUs, and Docker can hand them to containers: GPU mode;
- NVIDIA GPUs, but Docker cannot: stop before starting anything, naming the NVIDIA Container
  Toolkit and its fix, and `CPU=1`.

Docker can hand GPUs over when the engine has the `nvidia` runtime (what `nvidia-ctk runtime
configure` registers) or when the toolkit's `nvidia-container-runtime-hook` is installed: the
engine registers its `nvidia` device driver whenever it finds that hook on its PATH, configured
runtime or not, so a machine with the hook alone works and must not be refused. Where the facts
miss (an engine on another machine through DOCKER_HOST), compose's own "could not select device
driver" is the last word, and `torchrig.host.up` reports it the same way.

The decision (`choose_mode`) is a pure function of those facts; reading them is kept apart.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

CPU_OVERRIDE = "docker-compose.cpu.yml"
NVIDIA_RUNTIME = "nvidia"
NVIDIA_HOOK = "nvidia-container-runtime-hook"
# Where a package puts the hook; the engine, started by init, looks in these whatever our PATH.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TOOLKIT_FIX = "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker"


class ModeError(Exception):
    """`make up` cannot start in the mode asked for, or the choice itself is malformed: the
    lines, said as an error (torchrig.voice), say what to do."""

    def __init__(self, *lines: str) -> None:
        super().__init__(lines[0])
        self.lines = lines


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

    def evidence(self) -> str:
        found = [*self.device_nodes[:3], *(["nvidia-smi"] if self.nvidia_smi else [])]
        return ", ".join(found)


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
    raise ModeError(
        f"CPU={value!r} is not 0 or 1: `make up CPU=1` starts without GPUs, `make up CPU=0` "
        "insists on GPUs, and without CPU `make up` chooses from what this machine has."
    )


def needs_engine_runtimes(forced: bool | None, host: HostGpus) -> bool:
    """Only a machine with GPUs and no forced choice needs to ask the engine (it costs a call)."""
    return forced is None and host.has_gpus


def choose_mode(forced: bool | None, host: HostGpus, runtimes: frozenset[str] | None) -> Mode:
    """The mode to start in. `runtimes`: the engine's (None where `needs_engine_runtimes` said
    they were not needed)."""
    if forced is not None:
        return Mode(cpu=forced)
    if not host.has_gpus:
        return Mode(cpu=True, notice=CPU_MODE_NOTICE)
    if runtimes is not None and NVIDIA_RUNTIME not in runtimes and host.hook is None:
        raise ModeError(*no_toolkit_lines(host, runtimes))
    return Mode(cpu=False)


CPU_MODE_NOTICE = (
    "CPU mode: no NVIDIA GPU on this machine (no /dev/nvidia* device, no nvidia-smi), so the "
    "workstation starts without GPUs.",
    "  To use GPUs: install the NVIDIA driver and the NVIDIA Container Toolkit (README: "
    "Prerequisites), then `make up` again. CPU=1 or CPU=0 forces either mode.",
)


def no_toolkit_lines(host: HostGpus | None, runtimes: Iterable[str] | None) -> list[str]:
    """Docker cannot hand this machine's GPUs to a container: what is missing and the fix."""
    if host is not None and runtimes is not None:
        known = ", ".join(sorted(runtimes)) or "none"
        what = (
            f"this machine has NVIDIA GPUs ({host.evidence()}), but Docker cannot hand "
            f"them to containers: it has no `{NVIDIA_RUNTIME}` runtime (it has: {known}) and "
            f"{NVIDIA_HOOK} is not installed."
        )
    else:
        what = (
            "Docker cannot hand GPUs to containers (compose: could not select device "
            'driver "nvidia"): the NVIDIA Container Toolkit is missing, or Docker is not '
            "configured for it."
        )
    return [
        what,
        "  Install the NVIDIA Container Toolkit (README: Prerequisites), then configure Docker "
        f"for it: `{TOOLKIT_FIX}`.",
        "  Or start without GPUs: `make up CPU=1`.",
    ]


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
