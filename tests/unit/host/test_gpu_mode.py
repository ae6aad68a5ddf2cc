"""GPUs or CPU mode for `make up`, from the machine's and the engine's facts."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from torchrig.host import gpu_mode
from torchrig.host.gpu_mode import HostGpus
from torchrig.shared.voice import CannotGoOn, Voice

NO_GPU = HostGpus(device_nodes=(), nvidia_smi=None, hook=None)
GPUS = HostGpus(("/dev/nvidia0", "/dev/nvidiactl"), "/usr/bin/nvidia-smi", hook=None)
GPUS_AND_HOOK = HostGpus(
    ("/dev/nvidia0",), "/usr/bin/nvidia-smi", "/usr/bin/" + gpu_mode.NVIDIA_HOOK
)
# What `docker info` lists on this project's test engine, and after `nvidia-ctk runtime configure`.
PLAIN_RUNTIMES = frozenset({"io.containerd.runc.v2", "io.containerd.runtime.v1.linux", "runc"})
NVIDIA_RUNTIMES = PLAIN_RUNTIMES | {"nvidia"}


def said(refused: CannotGoOn) -> str:
    """The refusal as `make up` says it: an error."""
    assert not refused.lines[0].startswith(("error:", "warning:"))  # the voice adds the level
    text = io.StringIO()
    Voice(stream=text).error("\n".join(refused.lines))
    return text.getvalue()


@pytest.mark.parametrize(("value", "forced"), [("", None), (" ", None), ("1", True), ("0", False)])
def test_cpu_setting_is_one_zero_or_unset(value: str, forced: bool | None) -> None:
    assert gpu_mode.parse_cpu_setting(value) is forced


@pytest.mark.parametrize("value", ["yes", "true", "2", "cpu"])
def test_any_other_cpu_setting_says_what_the_values_mean(value: str) -> None:
    with pytest.raises(CannotGoOn) as refused:
        gpu_mode.parse_cpu_setting(value)
    assert said(refused.value).startswith(f"error: CPU={value!r} is not 0 or 1: `make up CPU=1`")


@pytest.mark.parametrize("host", [NO_GPU, GPUS])
@pytest.mark.parametrize("forced", [True, False])
def test_a_forced_choice_is_taken_whatever_the_machine_has(host: HostGpus, forced: bool) -> None:
    assert not gpu_mode.needs_engine_runtimes(forced, host)
    assert gpu_mode.choose_mode(forced, host, None) == gpu_mode.Mode(cpu=forced)


def test_no_gpu_at_all_starts_in_cpu_mode_and_says_how_to_get_gpus() -> None:
    assert not gpu_mode.needs_engine_runtimes(None, NO_GPU)  # no engine call needed
    mode = gpu_mode.choose_mode(None, NO_GPU, None)
    assert mode.cpu
    assert mode.notice[0].startswith("CPU mode: no NVIDIA GPU on this machine")
    assert "NVIDIA Container Toolkit" in mode.notice[1]
    assert "CPU=0" in mode.notice[1]


def test_nvidia_smi_alone_counts_as_gpus() -> None:
    """The driver creates /dev/nvidia* on first use: a fresh boot may have none yet."""
    smi_only = HostGpus(device_nodes=(), nvidia_smi="/usr/bin/nvidia-smi", hook=None)
    assert smi_only.has_gpus
    assert gpu_mode.needs_engine_runtimes(None, smi_only)


def test_gpus_with_the_nvidia_runtime_start_with_gpus() -> None:
    assert gpu_mode.needs_engine_runtimes(None, GPUS)
    assert gpu_mode.choose_mode(None, GPUS, NVIDIA_RUNTIMES) == gpu_mode.Mode(cpu=False)


def test_gpus_with_the_toolkit_hook_but_no_configured_runtime_start_with_gpus() -> None:
    """Docker registers its nvidia device driver whenever the hook is on its PATH."""
    assert gpu_mode.choose_mode(None, GPUS_AND_HOOK, PLAIN_RUNTIMES) == gpu_mode.Mode(cpu=False)


def test_gpus_without_the_toolkit_stop_at_once_with_its_fix_and_cpu_1() -> None:
    with pytest.raises(CannotGoOn) as refused:
        gpu_mode.choose_mode(None, GPUS, PLAIN_RUNTIMES)
    text = said(refused.value)
    assert text.startswith("error: this machine has NVIDIA GPUs (/dev/nvidia0, /dev/nvidiactl,")
    assert "it has no `nvidia` runtime (it has: io.containerd.runc.v2," in text
    assert "NVIDIA Container Toolkit" in text
    assert "sudo nvidia-ctk runtime configure --runtime=docker" in text
    assert "sudo systemctl restart docker" in text
    assert "`make up CPU=1`" in text


def test_host_facts_are_read_from_dev_and_the_path(tmp_path: Path) -> None:
    for name in ("nvidia0", "nvidiactl", "null"):
        (tmp_path / name).touch()
    found = {"nvidia-smi": "/usr/bin/nvidia-smi"}
    host = gpu_mode.read_host_gpus(tmp_path, lambda name, path=None: found.get(name))
    assert host.device_nodes == (str(tmp_path / "nvidia0"), str(tmp_path / "nvidiactl"))
    assert host.nvidia_smi == "/usr/bin/nvidia-smi"
    assert host.hook is None


def test_host_without_anything_nvidia(tmp_path: Path) -> None:
    host = gpu_mode.read_host_gpus(tmp_path, lambda name, path=None: None)
    assert host == NO_GPU
    assert not host.has_gpus


def test_runtimes_come_from_docker_info_json() -> None:
    info = '{"io.containerd.runc.v2":{"path":"runc"},"nvidia":{"path":"nvidia-container-runtime"}}'
    assert gpu_mode.parse_runtimes(info) == {"io.containerd.runc.v2", "nvidia"}
    assert gpu_mode.parse_runtimes("null") == frozenset()


REPO_ROOT = Path(__file__).resolve().parents[3]


def test_the_mode_is_decided_once_by_up_and_no_other_target_names_the_cpu_override() -> None:
    """The Makefile passes CPU to `up` alone; the CPU override is added by `decide` only."""
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    assert gpu_mode.CPU_OVERRIDE not in makefile
    uses = [line.strip().lstrip("@") for line in makefile.splitlines() if "$(CPU)" in line]
    assert uses == [
        '$(HOST_PY) torchrig.host.up --cpu "$(CPU)" --recreate "$(RECREATE)" -- $(COMPOSE)'
    ]


def test_decide_adds_the_cpu_override_in_cpu_mode_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_mode, "read_host_gpus", lambda: NO_GPU)
    plain = gpu_mode.Compose(["docker", "compose", "-f", "docker-compose.yml"])
    mode, cpu = gpu_mode.decide("", plain)
    assert mode.cpu and mode.notice == gpu_mode.CPU_MODE_NOTICE
    assert cpu.command[-2:] == ["-f", gpu_mode.CPU_OVERRIDE]
    mode, forced = gpu_mode.decide("0", plain)  # no GPUs, but insisted on: compose will say
    assert not mode.cpu and forced == plain
