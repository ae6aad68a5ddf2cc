"""Each checkout its own workstation: the name chosen and written, an old checkout's kept, and
another folder's workstation never touched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from torchrig.host import project
from torchrig.shared.voice import CannotGoOn

from .engine import FakeEngine, workstation

ALICE = Path("/home/alice/torchrig")


@pytest.fixture
def alice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Alice's checkout: her user name (a home without SSH keys and compose reading .env, as
    every unit test has)."""
    monkeypatch.setattr(project, "user_name", lambda: "alice")
    return tmp_path


@pytest.mark.parametrize(("user", "folder", "name"), [
    ("alice", "/home/alice/torchrig", "torchrig-alice"),
    ("alice", "/home/alice/myproj", "torchrig-alice-myproj"),
    ("Alice.Smith", "/srv/My Project (v2)", "torchrig-alice-smith-my-project-v2"),
    ("42", "/x/__", "torchrig-42"),
    ("___", "/x/torchrig", f"torchrig-uid{os.getuid()}"),  # never the old shared name
])  # fmt: skip
def test_the_name_is_readable_and_one_compose_accepts(user: str, folder: str, name: str) -> None:
    found = project.readable_name(user, Path(folder))
    assert found == name
    project.check_name(found)


@pytest.mark.parametrize("bad", ["Alice", "-x", "a/b", "", "a b"])
def test_a_name_compose_refuses_is_a_clear_error(bad: str) -> None:
    with pytest.raises(CannotGoOn) as failed:
        project.check_name(bad)
    assert "is not a name compose accepts" in failed.value.lines[0]
    assert "COMPOSE_PROJECT_NAME=<name> in .env" in failed.value.lines[1]


def test_the_first_run_writes_the_name_with_the_folder_s_hash(alice: Path) -> None:
    env_file = alice / ".env"
    name = project.with_hash("torchrig-alice", ALICE)
    assert name.startswith("torchrig-alice-") and len(name) == len("torchrig-alice-") + 6
    assert project.settle(env_file, ALICE) == project.Settled(name, written=True)
    text = env_file.read_text()
    assert f"\nCOMPOSE_PROJECT_NAME={name}\n" in text
    assert f"the image is {name}/workstation:latest" in text
    assert project.new_name(Path("/home/alice/b/torchrig")) != name  # a clone beside it


def test_a_name_given_on_the_first_run_is_the_one_written(
    alice: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPOSE_PROJECT_NAME", "alice-exp")
    assert project.settle(alice / ".env", ALICE).name == "alice-exp"
    monkeypatch.delenv("COMPOSE_PROJECT_NAME")
    assert project.settle(alice / ".env", ALICE).name == "alice-exp"  # it stuck
    monkeypatch.setenv("COMPOSE_PROJECT_NAME", "Alice")
    (alice / ".env").unlink()
    with pytest.raises(CannotGoOn):
        project.settle(alice / ".env", ALICE)
    assert not (alice / ".env").exists()


def test_the_name_set_wins_and_is_checked(alice: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (alice / ".env").write_text("COMPOSE_PROJECT_NAME=mine\n")
    assert project.settle(alice / ".env", ALICE).name == "mine"
    monkeypatch.setenv("COMPOSE_PROJECT_NAME", "Not/Valid")
    with pytest.raises(CannotGoOn):
        project.settle(alice / ".env", ALICE)


def test_an_old_checkout_gets_a_name_of_its_own_written_to_its_env(
    alice: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An .env from before each checkout had a name: a name of its own, written and said."""
    env_file = alice / ".env"
    env_file.write_text("PUID=4242\n")
    name = project.with_hash("torchrig-alice", ALICE)
    assert project.settle(env_file, ALICE).name == name
    assert env_file.read_text().endswith(f"COMPOSE_PROJECT_NAME={name}\n")
    assert f"added COMPOSE_PROJECT_NAME={name}" in capsys.readouterr().err


def test_with_other_env_files_the_name_is_left_to_compose(
    alice: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPOSE_ENV_FILES", str(alice / "stack.env"))
    assert project.settle(alice / ".env", ALICE) == project.Settled(None, written=False)


def test_another_folder_s_workstation_is_refused_naming_folder_and_owner(tmp_path: Path) -> None:
    theirs = tmp_path / "bob" / "torchrig"
    theirs.mkdir(parents=True)
    engine = FakeEngine([workstation(project="torchrig-x", folder=str(theirs))])
    with pytest.raises(CannotGoOn) as refused:
        project.refuse("torchrig-x", ALICE, engine)
    lines = refused.value.lines
    owner = project.folder_owner(str(theirs))
    assert f"in use by {owner}'s workstation from {theirs}" in lines[0]
    assert "nothing was started, recreated or removed" in lines[0]
    assert "COMPOSE_PROJECT_NAME=<name>" in lines[1]


def test_the_owner_of_a_folder_not_on_this_machine_is_its_puid() -> None:
    engine = FakeEngine([workstation(project="torchrig-x", folder="/nowhere/torchrig")])
    with pytest.raises(CannotGoOn) as refused:
        project.refuse("torchrig-x", ALICE, engine)
    assert "in use by PUID 4242's workstation" in refused.value.lines[0]


def test_this_folder_s_own_workstation_is_not_refused() -> None:
    engine = FakeEngine([workstation(project="torchrig-alice", folder=str(ALICE))])
    project.refuse("torchrig-alice", ALICE, engine)
