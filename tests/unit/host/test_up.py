"""`make up`: the mode, compose's own failures, the wait for the services, then how to connect;
or the container's errors."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePath

import pytest
from torchrig.host import gpu_mode, up
from torchrig.host.workstations import Compose
from torchrig.shared import startup
from torchrig.shared.startup import Answer
from torchrig.shared.voice import MAX_LINE_BYTES

SETTING_ERROR = "SSH_PUBLIC_KEY (line 1): there is text before the key type"


@dataclass(frozen=True)
class FakeCompose(Compose):
    """Canned answers by the longest matching start of a call's arguments ("ps --all --quiet",
    or just "up"); remembers every call (compose's and docker's alike)."""

    answers: dict[str, tuple[int, str]] = field(default_factory=dict)
    calls: list[tuple[str, ...]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    copied: dict[str, bytes] = field(default_factory=dict)  # `docker cp` of a container's file
    deadlines: list[float] = field(default_factory=list)  # each `ask`'s own time limit
    times_out: bool = False  # `ask` runs past its time limit

    def answer(self, args: tuple[str, ...]) -> tuple[int, str]:
        self.calls.append(args)
        joined = " ".join(args)
        keys = [key for key in self.answers if joined == key or joined.startswith(f"{key} ")]
        return self.answers[max(keys, key=len)] if keys else (0, "")

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        code, out = self.answer(args)
        return subprocess.CompletedProcess(args, code, out, out if code else "")

    def docker(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(*args)

    def shown(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(*args)

    def ask(self, *args: str, on_line: Callable[[str], None], timeout_s: float) -> int:
        self.deadlines.append(timeout_s)
        code, out = self.answer(args)
        if self.times_out:
            raise subprocess.TimeoutExpired(list(args), timeout_s)
        for line in out.splitlines():
            on_line(line)
        return code

    def with_file(self, name: str) -> Compose:
        self.files.append(name)
        return self

    def copy_out(self, container: str, path: str, limit: int, timeout_s: float) -> bytes | None:
        self.calls.append(("cp", f"{container}:{path}", "-"))
        return self.copied.get(path, b"")[:limit] or None


NO_GPU = gpu_mode.HostGpus(device_nodes=(), nvidia_smi=None, hook=None)
GPUS = gpu_mode.HostGpus(device_nodes=("/dev/nvidia0",), nvidia_smi=None, hook=None)


RECREATE_CHECKS: list[str] = []  # the compose commands `recreate.check` was asked about


def checked_recreate(compose: Compose, config_json: str, inspected: object) -> None:
    RECREATE_CHECKS.append(" ".join(compose.command))


def run_main(
    monkeypatch: pytest.MonkeyPatch,
    compose: FakeCompose,
    cpu: str = "",
    host: gpu_mode.HostGpus = NO_GPU,
    recreate: str = "",
) -> int:
    """up.main with compose, the machine's GPUs, .env/bind mounts and the build check faked."""
    monkeypatch.setattr(up, "Compose", lambda command: compose)
    monkeypatch.setattr(up.gpu_mode, "read_host_gpus", lambda: host)
    monkeypatch.setattr(up.prepare, "prepare", lambda run_compose: 0)
    monkeypatch.setattr(up, "claim", lambda compose, cpu: 0)  # test_up_claim.py
    monkeypatch.setattr(up.settings, "check_names", lambda *args: None)  # test_settings.py
    monkeypatch.setattr(up.recreate, "check", checked_recreate)  # test_recreate.py
    monkeypatch.setattr(up.buildcheck, "checked_torch_version", lambda environ: ("2.13.0", []))
    argv = ["--timeout", "60", "--cpu", cpu, "--recreate", recreate,
            "--", "docker", "compose", "-f", "docker-compose.yml"]  # fmt: skip
    return up.main(argv)


def inspected(status: str, exit_code: int = 0, restarts: int = 0, health: str = "") -> str:
    state = {"Status": status, "ExitCode": exit_code, "Health": {"Status": health}}
    return json.dumps([{"Name": "/x-workstation-1", "State": state, "RestartCount": restarts}])


def archive(
    text: str, written: float | None = None, symlink: bool = False, folder: bool = False
) -> bytes:
    """What `docker cp CONTAINER:FILE -` writes: a tar of the file (a symlink stays one; a
    folder comes first, then what is in it)."""
    data = text.encode()
    name = PurePath(startup.START_ERROR).name
    member = tarfile.TarInfo(f"{name}/forged" if folder else name)
    member.mtime = int(time.time() + 1 if written is None else written)
    if symlink:
        member.type, member.linkname = tarfile.SYMTYPE, "/etc/shadow"
    else:
        member.size = len(data)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        if folder:
            made = tarfile.TarInfo(name)
            made.type, made.mtime = tarfile.DIRTYPE, member.mtime
            tar.addfile(made)
        tar.addfile(member, None if symlink else io.BytesIO(data))
    return out.getvalue()


def listed(*publishers: tuple[str, int, int]) -> str:
    """`compose ps --format json`: one line per container (Compose >= 2.21)."""
    rows = [{"URL": url, "TargetPort": target, "PublishedPort": port, "Protocol": "tcp"}
            for url, target, port in publishers]  # fmt: skip
    return json.dumps({"ID": "abc123", "State": "running", "Publishers": rows}) + "\n"


RUNNING = listed(("0.0.0.0", 8888, 18888), ("127.0.0.1", 2222, 12222))
ENDPOINT_LINES = (
    "status: setting up (user, mounts, checks)\n"
    "status: starting jupyter\n"
    "Jupyter: http://127.0.0.1:18888/lab?token=abc\n"
    "SSH:     ssh -p 12222 dev@127.0.0.1\n"
)


def ready_compose(**answers: tuple[int, str]) -> FakeCompose:
    return FakeCompose(
        ["docker", "compose"],
        {"ps --all --format json": (0, RUNNING), "exec": (0, ENDPOINT_LINES), **answers},
    )


def waiting_ends(exec_answer: tuple[int, str], state: str) -> FakeCompose:
    """The command that waits ends with `exec_answer`; then Docker shows the container so."""
    return ready_compose(
        **{"exec": exec_answer, "ps --all --quiet": (0, "abc123\n"), "inspect": (0, state)}
    )


def test_ready_prints_how_to_connect(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    compose = ready_compose()
    assert run_main(monkeypatch, compose, cpu="1") == 0
    (started,) = [call for call in compose.calls if call[0] == "up"]
    assert started == ("up", "-d")  # no --wait: Docker's health interval is not awaited
    (asked,) = [call for call in compose.calls if call[0] == "exec"]
    assert asked[:4] == ("exec", "--user", "root", "abc123")  # dev's uid may change meanwhile
    assert asked[-6:] == ("--wait", "60", "--jupyter", "0.0.0.0:18888", "--ssh", "127.0.0.1:12222")
    captured = capsys.readouterr()
    assert "  Jupyter: http://127.0.0.1:18888/lab?token=abc\n" in captured.out
    assert "  SSH:     ssh -p 12222 dev@127.0.0.1\n" in captured.out
    assert "status:" not in captured.out
    # What the container says it is doing, as it changes, while `make up` waits.
    assert "waiting: setting up (user, mounts, checks)\nwaiting: starting jupyter\n" in captured.err
    assert os.environ["PYTORCH_VERSION"] == "2.13.0"  # for compose, should it build the image


def test_without_gpus_make_up_starts_in_cpu_mode_and_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    compose = ready_compose()
    assert run_main(monkeypatch, compose, cpu="", host=NO_GPU) == 0
    assert compose.files == [gpu_mode.CPU_OVERRIDE]
    assert not any(call[0] == "info" for call in compose.calls)  # nothing to ask the engine
    captured = capsys.readouterr()
    assert captured.err.startswith("CPU mode: no NVIDIA GPU on this machine")
    assert captured.out.startswith("The workstation is ready (CPU mode: no GPUs):\n")


def test_cpu_0_insists_on_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    compose = ready_compose()
    assert run_main(monkeypatch, compose, cpu="0", host=NO_GPU) == 0
    assert compose.files == []


def test_gpus_with_the_nvidia_runtime_start_in_gpu_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    compose = ready_compose(info=(0, '{"runc":{"path":"runc"},"nvidia":{"path":"x"}}'))
    assert run_main(monkeypatch, compose, host=GPUS) == 0
    assert ("info", "--format", "{{json .Runtimes}}") in compose.calls
    assert compose.files == []


def test_gpus_without_the_toolkit_fail_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    compose = ready_compose(info=(0, '{"runc":{"path":"runc"}}'))
    assert run_main(monkeypatch, compose, host=GPUS) == 1
    assert compose.calls == [("info", "--format", "{{json .Runtimes}}")]
    err = capsys.readouterr().err
    assert "nvidia-ctk runtime configure --runtime=docker" in err
    assert "not ready" not in err


def test_a_malformed_cpu_setting_starts_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    compose = ready_compose()
    assert run_main(monkeypatch, compose, cpu="yes") == 1
    assert compose.calls == []
    assert capsys.readouterr().err.startswith("error: CPU='yes' is not 0 or 1")


def test_an_engine_that_does_not_answer_when_asked_for_its_runtimes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    down = "Cannot connect to the Docker daemon at unix:///x.sock. Is the docker daemon running?"
    compose = ready_compose(info=(1, down))
    assert run_main(monkeypatch, compose, host=GPUS) == 1
    assert "error: the Docker engine at unix:///x.sock does not answer" in capsys.readouterr().err


def test_a_failed_start_says_its_recorded_error_and_stops_the_container(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The container stopped under the waiting command; its start (root) recorded why.
    compose = waiting_ends((137, ""), inspected("restarting", exit_code=1, restarts=2))
    compose.copied[startup.START_ERROR] = archive(f"{SETTING_ERROR}\n  set it in .env\n")
    assert run_main(monkeypatch, compose, cpu="1") == 1
    err = capsys.readouterr().err
    assert err.startswith(
        f"error: the workstation did not start:\n  [torchrig] error: {SETTING_ERROR}\n"
        "    set it in .env\n"
        "Stopped it, so it does not restart into the same error"
    )
    stop = compose.calls.index(("stop", "workstation"))
    copy = compose.calls.index(("cp", "x-workstation-1:/run/torchrig-start-error", "-"))
    assert stop < copy  # stopped first: no restart of Docker's writes the record meanwhile
    assert not any(call[0] == "logs" for call in compose.calls)  # nothing scrapes the log


@pytest.mark.parametrize(
    "record",
    [
        None,  # it crashed before it could record anything, or failed as dev
        archive(SETTING_ERROR, written=1),  # an earlier start's, not this one's
        archive("", symlink=True),  # a symlink in its place
        archive(SETTING_ERROR, folder=True),  # a folder in its place, a record inside
        archive("x" * (startup.MAX_START_ERROR_BYTES + 1)),
        b"not a tar",
    ],
)
def test_a_start_that_stopped_without_its_record_is_said_by_its_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], record: bytes | None
) -> None:
    compose = waiting_ends((126, "container is restarting"), inspected("exited", exit_code=139))
    if record is not None:
        compose.copied[startup.START_ERROR] = record
    assert run_main(monkeypatch, compose, cpu="1") == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "error: the workstation did not start:\n"
        "  its start exited with status 139 (`make logs` shows why)\n"
    )
    assert SETTING_ERROR not in err and "shadow" not in err
    assert ("stop", "workstation") in compose.calls


def test_the_record_reaches_the_terminal_without_escape_sequences() -> None:
    said = up.start_error(archive("PUID=x\x1b]0;owned\x07 \x9b2Jis not a number\n"), since=0)
    assert said == "PUID=x is not a number"


def fake_docker(folder: Path, body: str) -> Compose:
    """A `docker` whose every command runs `body` (a line of shell)."""
    docker = folder / "docker"
    docker.write_text(f"#!/bin/sh\n{body}\n")
    docker.chmod(0o755)
    return Compose([str(docker), "compose"])


@pytest.mark.timeout(120)
def test_what_docker_cp_writes_is_read_only_up_to_its_limit_and_its_time(tmp_path: Path) -> None:
    """A record the size of a disk (a sparse file, /dev/zero), or one that never comes: read no
    further than the limit, waited on no longer than the time limit."""
    endless = fake_docker(tmp_path, "exec cat /dev/zero")
    assert endless.copy_out("c", startup.START_ERROR, limit=4096, timeout_s=60) == bytes(4096)
    silent = fake_docker(tmp_path, "exec sleep 600")
    assert silent.copy_out("c", startup.START_ERROR, limit=4096, timeout_s=1) is None


@pytest.mark.parametrize(("status", "health", "says"), [
    ("running", "unhealthy", "runs but is not healthy"),
    ("running", "starting", "was not ready within 60 s"),
])  # fmt: skip
def test_a_running_container_is_left_running_to_look_at(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    status: str,
    health: str,
    says: str,
) -> None:
    not_ready = "status: starting jupyter\nnot ready: jupyter: refused\n"
    compose = waiting_ends((Answer.WAITED_OUT, not_ready), inspected(status, health=health))
    assert run_main(monkeypatch, compose, cpu="1") == 1
    err = capsys.readouterr().err
    assert says in err
    assert "  not answering: jupyter: refused" in err
    assert ("stop", "workstation") not in compose.calls


def test_a_state_file_that_is_not_the_starts_is_one_clear_error_at_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    planted = "not ready: /run/torchrig/services: not a regular file, not read\n"
    compose = waiting_ends((Answer.NOT_THE_STARTS, planted), inspected("running", health="healthy"))
    assert run_main(monkeypatch, compose, cpu="1") == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "error: the workstation's state is not its start's: /run/torchrig/services: not a "
        "regular file, not read\n"
    )
    assert "within" not in err and ("stop", "workstation") not in compose.calls


def test_when_compose_itself_fails_its_own_message_stands_and_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    compose = ready_compose(up=(18, "something compose says\n"))
    assert run_main(monkeypatch, compose, cpu="1") == 18
    err = capsys.readouterr().err
    assert "error: `docker compose up` failed (exit 18) before the workstation started" in err
    assert "not ready" not in err
    assert not any(call[0] in ("exec", "stop") for call in compose.calls)


def test_a_published_image_that_cannot_be_pulled_is_said_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    image = "localhost:1/torchrig:absent"
    config = {"services": {"workstation": {"image": image, "pull_policy": "missing"}}}
    compose = ready_compose(
        up=(18, 'Error response from daemon: Get "http://localhost:1/v2/": refused\n'),
        config=(0, json.dumps(config)),
        **{"image inspect": (1, "Error: No such image")},
    )
    assert run_main(monkeypatch, compose, cpu="1") == 18
    assert f"error: the image {image} is not on this machine" in capsys.readouterr().err


def test_an_image_compose_could_build_is_not_called_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {"services": {"workstation": {"image": "torchrig/workstation:latest", "build": {}}}}
    compose = ready_compose(
        up=(17, "failed to solve: something\n"),
        config=(0, json.dumps(config)),
        **{"image inspect": (1, "Error: No such image")},
    )
    assert run_main(monkeypatch, compose, cpu="1") == 17
    err = capsys.readouterr().err
    assert "is not on this machine" not in err
    assert "`docker compose up` failed (exit 17)" in err


def test_an_ipv6_address_is_in_brackets() -> None:
    assert up.host_address({"URL": "::", "PublishedPort": 8888}) == "[::]:8888"


def test_when_asking_the_running_container_fails_that_is_what_is_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    oci = "OCI runtime exec failed: exec failed: unable to start container process"
    compose = waiting_ends((126, oci), inspected("running", health="starting"))
    assert run_main(monkeypatch, compose, cpu="1") == 1
    err = capsys.readouterr().err
    assert f"error: asking the workstation whether it is ready failed:\n  {oci}\n" in err
    assert "not ready" not in err
    assert ("stop", "workstation") not in compose.calls


def test_what_the_container_says_reaches_the_terminal_without_escape_sequences() -> None:
    # A token or status line the container prints while `make up` waits, through a real pipe.
    heard: list[str] = []
    code = Compose(["sh"]).ask(
        "-c", r"printf 'status: \033[2Jwaiting\r\n'; printf 'x\033]52;c;eA==\007' >&2; exit 3",
        on_line=heard.append, timeout_s=60,
    )  # fmt: skip
    assert (code, heard) == (3, ["status: waiting", "x"])


@pytest.mark.timeout(120)
def test_the_answer_to_the_wait_is_bounded_in_size_and_in_time() -> None:
    """`make up` never holds a line whole, nor waits past its own limit, whatever answers."""
    heard: list[str] = []
    flood = "head -c 5000000 /dev/zero | tr '\\0' x; echo; exec sleep 600"
    with pytest.raises(subprocess.TimeoutExpired):
        Compose(["sh"]).ask("-c", flood, on_line=heard.append, timeout_s=2)
    assert len(heard) == 1 and len(heard[0]) < 2 * MAX_LINE_BYTES


def test_a_wait_that_outlives_its_limit_is_said_as_not_ready_in_time(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    compose = waiting_ends((0, ""), inspected("running", health="starting"))
    compose = FakeCompose(compose.command, compose.answers, times_out=True)
    assert run_main(monkeypatch, compose, cpu="1") == 1
    err = capsys.readouterr().err
    assert "the workstation was not ready within 60 s (still starting)" in err
    assert 60 < compose.deadlines[0] <= 60 + up.ASK_GRACE_S  # the container's wait, then docker's


RLIMIT_REFUSED = "error during container init: error setting rlimit type 8: operation not permitted"


def memlock_engine(limit: int, **answers: tuple[int, str]) -> FakeCompose:
    """compose asking for unlimited memlock (its default), on an engine that refuses all above
    `limit`: the throwaway containers of torchrig.host.memlock answer so."""
    config = {"services": {"workstation": {"ulimits": {"memlock": {"soft": -1, "hard": -1}}}}}
    probes = {
        f"run --rm --network none --pull never --log-driver none --ulimit memlock={n}:{n}": (
            (127, "no such file") if 0 <= n <= limit else (125, RLIMIT_REFUSED)
        )
        for n in [-1, *(2**power for power in range(10, 45))]
    }
    return ready_compose(
        config=(0, json.dumps(config)), **{"import": (0, "sha256:empty\n")}, **probes, **answers
    )


def test_memlock_the_engine_refuses_is_settled_before_compose_builds_or_makes_anything(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """MEMLOCK set and refused: stopped before `compose up`; unset: written, then up."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMLOCK", "-1")
    compose = memlock_engine(8 * 1024 * 1024)
    assert run_main(monkeypatch, compose, cpu="1") == 1
    assert "it grants 8 MiB" in capsys.readouterr().err
    assert not any(call[:2] == ("up", "-d") for call in compose.calls)

    monkeypatch.delenv("MEMLOCK")
    compose = memlock_engine(8 * 1024 * 1024)
    assert run_main(monkeypatch, compose, cpu="1") == 0
    assert (tmp_path / ".env").read_text().endswith("\nMEMLOCK=8388608\n")
    assert "wrote MEMLOCK=8388608 to .env" in capsys.readouterr().err
    assert ("up", "-d") in compose.calls


def test_the_recreate_check_runs_before_compose_unless_the_word_was_given(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    RECREATE_CHECKS.clear()
    assert run_main(monkeypatch, ready_compose(), cpu="1") == 0
    assert len(RECREATE_CHECKS) == 1
    assert run_main(monkeypatch, ready_compose(), cpu="1", recreate="1") == 0
    assert len(RECREATE_CHECKS) == 1  # `make up RECREATE=1`: not asked
    compose = ready_compose()
    assert run_main(monkeypatch, compose, cpu="1", recreate="yes") == 1
    assert "RECREATE='yes' is not 1" in capsys.readouterr().err and compose.calls == []
