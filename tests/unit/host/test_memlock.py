"""The memlock limit the engine grants, found before compose builds or makes anything
(torchrig.host.memlock): written to .env when MEMLOCK is unset, as `make up` picks free ports, and
a MEMLOCK the engine cannot grant refused with the value that works. The engine here is a stand-in
that answers as the real one does (tests/container/test_make_up_settings.py runs the real one)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from torchrig.host import memlock
from torchrig.shared.voice import CannotGoOn

MIB = 1024 * 1024
# What the engine says when it may not raise the limit, and when it set it and found nothing to
# run (docker run's exit 127), as this project's CI engine said them.
REFUSED = (
    "docker: Error response from daemon: failed to create shim task: OCI runtime create failed: "
    "runc create failed: unable to start container process: error during container init: error "
    "setting rlimits for ready process: error setting rlimit type 8: operation not permitted: "
    "unknown."
)
NOTHING_TO_RUN = (
    "docker: Error response from daemon: failed to create shim task: OCI runtime create failed: "
    'runc create failed: unable to start container process: exec: "/x": stat /x: no such file '
    "or directory: unknown."
)


class Engine:
    """`docker` with a hard memlock limit (bytes; -1: it grants any), and only the empty image it
    was given: records every call, and what it still holds."""

    def __init__(self, limit: int, importable: bool = True) -> None:
        self.limit = limit
        self.importable = importable
        self.calls: list[tuple[str, ...]] = []
        self.images: set[str] = set()

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        if args[0] == "import":
            if not self.importable:
                return subprocess.CompletedProcess(args, 1, "", "Cannot connect to the Docker")
            assert Path(args[-1]).stat().st_size > 0  # an archive, even an empty one
            self.images.add("sha256:empty")
            return subprocess.CompletedProcess(args, 0, "sha256:empty\n", "")
        if args[:2] == ("image", "rm"):
            self.images.discard(args[-1])
            return subprocess.CompletedProcess(args, 0, "", "")
        if args[0] == "run":
            assert "--rm" in args and args[-1] in self.images, args
            asked = args[args.index("--ulimit") + 1]  # memlock=SOFT:HARD
            hard = int(asked.rsplit(":", 1)[1])
            if self.limit != -1 and (hard == -1 or hard > self.limit):
                return subprocess.CompletedProcess(args, 125, "", REFUSED)
            return subprocess.CompletedProcess(args, 127, "", NOTHING_TO_RUN)
        raise AssertionError(f"unexpected docker {args}")

    @property
    def probes(self) -> int:
        return sum(call[0] == "run" for call in self.calls)


def service(memlock_value: int = -1) -> dict[str, Any]:
    """The workstation as `compose config --format json` writes it (the fields read)."""
    return {"ulimits": {"memlock": {"soft": memlock_value, "hard": memlock_value}}}


def started_with(memlock_value: int) -> dict[str, Any]:
    """`docker inspect` of this workstation's container, started once with that memlock."""
    return {
        "State": {"Status": "running", "StartedAt": "2026-11-27T21:00:00Z"},
        "HostConfig": {
            "Ulimits": [{"Name": "memlock", "Soft": memlock_value, "Hard": memlock_value}]
        },
    }


@pytest.mark.parametrize(
    ("limit", "most_probes"), [(8 * MIB, 3), (64 * 1024, 6), (16 * 1024 * MIB, 7), (-1, 1)]
)
def test_the_most_an_engine_grants_is_found_in_a_few_throwaway_containers(
    limit: int, most_probes: int
) -> None:
    """Unlimited in one; else the largest power of two, 8 MiB (systemd's default) tried first."""
    engine = Engine(limit)
    assert memlock.engine_memlock_limit(engine) == limit
    assert engine.probes <= most_probes
    assert engine.images == set()  # the empty image removed; its containers were --rm


def test_an_engine_that_cannot_be_asked_tells_nothing() -> None:
    assert memlock.engine_memlock_limit(Engine(8 * MIB, importable=False)) is None


@pytest.fixture
def env_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MEMLOCK", "")  # recorded, so that what `settle` sets is undone after
    monkeypatch.delenv("MEMLOCK")
    monkeypatch.delenv("COMPOSE_ENV_FILES", raising=False)
    path = tmp_path / ".env"
    path.write_text("PUID=1000\n")
    path.chmod(0o600)
    return path


def test_unset_and_refused_the_limit_is_written_with_a_note(
    env_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The newcomer's first `make up` on an engine that grants 8 MiB: found before the build, as
    free ports are, instead of compose's error after it."""
    memlock.settle(Engine(8 * MIB), service(), None, env_file)
    lines = env_file.read_text().splitlines()
    assert lines[-1] == "MEMLOCK=8388608" and lines[-2].startswith("# ")
    assert memlock.os.environ["MEMLOCK"] == "8388608"  # this run's compose
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "grants no unlimited memlock" in err and f"wrote MEMLOCK=8388608 to {env_file}" in err


def test_a_memlock_the_user_set_that_the_engine_cannot_grant_is_refused_with_the_fix(
    env_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMLOCK", "-1")  # `make up MEMLOCK=-1`
    with pytest.raises(CannotGoOn) as refused:
        memlock.settle(Engine(8 * MIB), service(), None, env_file)
    text = "\n".join(refused.value.lines)
    assert "may not raise the container's memlock limit to unlimited (MEMLOCK=-1)" in text
    assert "it grants 8 MiB" in text and "`make up MEMLOCK=8388608`" in text
    assert "Nothing was built or started." in refused.value.lines[0]
    assert env_file.read_text() == "PUID=1000\n"


def test_a_memlock_the_engine_grants_changes_nothing(
    env_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = Engine(8 * MIB)
    memlock.settle(engine, service(4 * MIB), None, env_file)
    assert engine.probes == 1 and env_file.read_text() == "PUID=1000\n"
    assert capsys.readouterr().err == ""


def test_a_workstation_started_with_it_already_is_not_asked_again(env_file: Path) -> None:
    engine = Engine(8 * MIB)
    memlock.settle(engine, service(8 * MIB), started_with(8 * MIB), env_file)
    assert engine.calls == []
    memlock.settle(engine, service(-1), started_with(8 * MIB), env_file)  # another: asked
    assert engine.probes > 0


def test_where_compose_reads_other_files_the_value_is_said_to_add(
    env_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COMPOSE_ENV_FILES", str(env_file))
    memlock.settle(Engine(8 * MIB), service(), None, env_file)
    assert env_file.read_text() == "PUID=1000\n"
    assert "add MEMLOCK=8388608 to your env file" in capsys.readouterr().err
