"""The host folders the container mounts: refused where dev would write what the host runs or what
is not dev's, made before Docker makes them as root, and as root handed to dev only where that is
safe by construction (a folder made just now; the checkout's own workspace/ and checkpoints/)."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from torchrig.host import bind_mounts


def test_missing_bind_sources_are_created_and_volumes_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # nothing handed over
    existing = tmp_path / "workspace"
    existing.mkdir()
    config = {
        "services": {
            "workstation": {
                "volumes": [
                    {"type": "bind", "source": str(existing), "target": "/workspace"},
                    {
                        "type": "bind",
                        "source": str(tmp_path / "ck" / "a"),
                        "target": "/checkpoints",
                    },
                    {"type": "volume", "source": "cache", "target": "/home/dev/.cache"},
                ]
            }
        }
    }
    sources = {point: found.source for point, found in bind_mounts.host_folders(config).items()}
    assert sources == {"/workspace": existing, "/checkpoints": tmp_path / "ck" / "a"}
    assert bind_mounts.prepare_mounts(config, tmp_path / "checkout") == 0
    assert (tmp_path / "ck" / "a").is_dir()
    assert capsys.readouterr().err.endswith(f"created {tmp_path / 'ck' / 'a'}\n")


def test_dev_must_write_the_workspace_and_checkpoints_and_only_read_the_data(
    tmp_path: Path,
) -> None:
    config = {
        "services": {
            "workstation": {
                "environment": {"PUID": "1234", "PGID": "2345"},
                "volumes": [
                    {"type": "bind", "source": str(tmp_path / "w"), "target": "/workspace"},
                    {"type": "bind", "source": str(tmp_path / "d"), "target": "/data"},
                ],
            }
        }
    }
    assert bind_mounts.writable_mounts(config) == {tmp_path / "w": "WORKSPACE_DIR"}
    assert bind_mounts.dev_ids(config) == (1234, 2345)


def test_dev_ids_default_to_the_image_user_and_reject_garbage() -> None:
    assert bind_mounts.dev_ids({"services": {"workstation": {}}}) == (1000, 1000)
    with pytest.raises(SystemExit, match="PUID/PGID must be numbers"):
        bind_mounts.dev_ids({"services": {"w": {"environment": {"PUID": "abc"}}}})


@pytest.mark.parametrize("value", ["-1", str(2**31)])
def test_dev_ids_refuse_what_the_container_would_refuse(value: str) -> None:
    # -1 would even mean "leave unchanged" to chown: the same parser as the container's settings.
    with pytest.raises(SystemExit, match=rf"PUID/PGID must be numbers \(PGID='{value}'"):
        bind_mounts.dev_ids({"services": {"w": {"environment": {"PGID": value}}}})


def test_dev_ids_take_one_id_and_default_the_other() -> None:
    config = {"services": {"w": {"environment": {"PUID": "1234", "PGID": None}}}}
    assert bind_mounts.dev_ids(config) == (1234, 1000)


ELSEWHERE = Path("/a/checkout/elsewhere")  # holds none of the folders of these tests
POINTS = {
    "WORKSPACE_DIR": "/workspace",
    "CHECKPOINT_DIR": "/checkpoints",
    "DATA_DIR": "/data",
    "PACKAGES_DIR": "/opt/packages",
}


def binds_config(read_only: tuple[str, ...] = (), **sources: Path) -> dict:
    """A compose config binding each mount point of the table, by its variable, to a folder
    (PACKAGES_DIR too: compose makes a host folder in place of a volume a bind)."""
    volumes = [
        {"type": "bind", "source": str(source), "target": POINTS[variable],
         **({"read_only": True} if variable in read_only else {})}
        for variable, source in sources.items()
    ]  # fmt: skip
    return {"services": {"workstation": {"volumes": volumes}}}


def test_a_bind_source_inside_a_folder_dev_writes_stops_make_up_before_anything_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    config = binds_config(WORKSPACE_DIR=workspace, CHECKPOINT_DIR=workspace / "ckpt")
    assert bind_mounts.prepare_mounts(config, ELSEWHERE) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: CHECKPOINT_DIR={workspace / 'ckpt'} lies inside WORKSPACE_DIR=")
    assert not (workspace / "ckpt").exists()


def test_a_bind_source_dev_already_swapped_for_a_symlink_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "ckpt").mkdir(parents=True)
    (tmp_path / "checkpoints").symlink_to(workspace / "ckpt")  # resolves inside the workspace
    (tmp_path / "data").symlink_to("/etc")
    config = binds_config(
        WORKSPACE_DIR=workspace, CHECKPOINT_DIR=tmp_path / "checkpoints", DATA_DIR=tmp_path / "data"
    )
    assert bind_mounts.prepare_mounts(config, ELSEWHERE) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"error: CHECKPOINT_DIR={tmp_path / 'checkpoints'} is a symlink")
    assert err[1].startswith(f"error: CHECKPOINT_DIR={tmp_path / 'checkpoints'} lies inside")
    assert err[2] == (
        f"error: DATA_DIR={tmp_path / 'data'} is a symlink (to /etc): a folder the container "
        "writes could have swapped it. Set DATA_DIR to the folder itself."
    )


def test_a_symlink_target_dev_chose_reaches_the_terminal_harmless(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """dev names the symlink's target: it is shown, but nothing in it acts on the terminal."""
    (tmp_path / "data").symlink_to("/tmp/\x1b]52;c;Y3VybA==\x07\x1b[2Jx")
    config = binds_config(WORKSPACE_DIR=tmp_path / "w", DATA_DIR=tmp_path / "data")
    (tmp_path / "w").mkdir()
    assert bind_mounts.prepare_mounts(config, ELSEWHERE) == 1
    err = capsys.readouterr().err
    assert "is a symlink (to /tmp/x)" in err and "\x1b" not in err and "\x07" not in err


def test_folders_side_by_side_or_one_folder_twice_are_fine(tmp_path: Path) -> None:
    side_by_side = binds_config(
        WORKSPACE_DIR=tmp_path / "w", CHECKPOINT_DIR=tmp_path / "c", DATA_DIR=tmp_path / "w"
    )
    assert bind_mounts.unsafe_sources(side_by_side, ELSEWHERE) == []
    # A folder mounted read-only (a user's own override) may hold the others: dev cannot swap
    # anything in it.
    in_data = binds_config(("DATA_DIR",), DATA_DIR=tmp_path, WORKSPACE_DIR=tmp_path / "w")
    assert bind_mounts.unsafe_sources(in_data, ELSEWHERE) == []


def test_a_packages_folder_inside_the_workspace_is_refused_like_a_bind(tmp_path: Path) -> None:
    config = binds_config(WORKSPACE_DIR=tmp_path / "w", PACKAGES_DIR=tmp_path / "w" / "pkgs")
    (problem,) = bind_mounts.unsafe_sources(config, ELSEWHERE)
    assert problem.startswith(
        f"PACKAGES_DIR={tmp_path / 'w' / 'pkgs'} lies inside WORKSPACE_DIR={tmp_path / 'w'}, "
        "which the container's dev writes"
    )


def test_a_folder_inside_the_data_folder_is_refused_as_data_is_mounted_read_write(
    tmp_path: Path,
) -> None:
    scratch = tmp_path / "scratch"
    config = binds_config(DATA_DIR=scratch, CHECKPOINT_DIR=scratch / "ckpt")
    (problem,) = bind_mounts.unsafe_sources(config, ELSEWHERE)
    assert problem.startswith(f"CHECKPOINT_DIR={scratch / 'ckpt'} lies inside DATA_DIR={scratch}")


# --- the checkout: dev never writes the code the host runs -----------------------------------


def test_a_folder_that_holds_the_checkout_or_lies_in_it_is_refused_before_anything_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    holder = tmp_path / "holder"
    checkout = holder / "torchrig"
    (checkout / "scripts").mkdir(parents=True)
    config = binds_config(WORKSPACE_DIR=holder, CHECKPOINT_DIR=checkout / "scripts",
                          DATA_DIR=tmp_path / "elsewhere" / "data")  # fmt: skip
    assert bind_mounts.prepare_mounts(config, checkout) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"error: WORKSPACE_DIR={holder} holds this checkout ({checkout}): the container's dev "
        "would write its code, which the host runs (make up). Choose a folder beside the "
        "checkout.",
        f"error: CHECKPOINT_DIR={checkout / 'scripts'} lies inside this checkout ({checkout}), "
        "whose code the host runs: the container's dev would write there. Use its own "
        "./workspace, ./checkpoints, ./data or a folder outside it.",
        f"error: CHECKPOINT_DIR={checkout / 'scripts'} lies inside WORKSPACE_DIR={holder}, "
        "which the container's dev writes: dev could put a symlink in its place before the next "
        "start, and Docker would mount whatever it points to. Choose a folder beside it.",
    ]
    assert not (tmp_path / "elsewhere").exists()
    # The checkout itself, and a link to a folder that holds it, the same.
    (tmp_path / "link").symlink_to("/")
    for source in (checkout, tmp_path / "link" / str(checkout).lstrip("/") / ".."):
        (problem,) = bind_mounts.unsafe_sources(binds_config(PACKAGES_DIR=source), checkout)
        assert problem.startswith(f"PACKAGES_DIR={source} holds this checkout"), problem


def test_the_checkouts_own_folders_and_folders_outside_it_are_fine(tmp_path: Path) -> None:
    checkout = tmp_path / "torchrig"
    fine = binds_config(WORKSPACE_DIR=checkout / "workspace", CHECKPOINT_DIR=checkout /
                        "checkpoints", DATA_DIR=checkout / "data" / "imagenet",
                        PACKAGES_DIR=tmp_path / "packages")  # fmt: skip
    assert bind_mounts.unsafe_sources(fine, checkout) == []
    # Read-only (a user's own override), the checkout's parent is no one's to write.
    parent = binds_config(("DATA_DIR",), DATA_DIR=tmp_path)
    assert bind_mounts.unsafe_sources(parent, checkout) == []


# --- as root: ownership changes only where they are safe by construction ----------------------

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
DEV_UID = 1000  # the image's: PUID is never root's


@pytest.fixture
def checkout() -> Iterator[Path]:
    """A checkout of root's, in a folder dev may pass through (pytest's own are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="torchrig-test-"))
    folder.chmod(0o755)
    (folder / "torchrig").mkdir(mode=0o755)
    yield folder / "torchrig"
    shutil.rmtree(folder)


def own_folders(checkout: Path, **more: Path) -> dict:
    return binds_config(WORKSPACE_DIR=checkout / "workspace",
                        CHECKPOINT_DIR=checkout / "checkpoints", DATA_DIR=checkout / "data",
                        **more)  # fmt: skip


def as_dev(*command: str) -> subprocess.CompletedProcess[str]:
    setpriv = ["setpriv", f"--reuid={DEV_UID}", f"--regid={DEV_UID}", "--clear-groups"]
    return subprocess.run([*setpriv, *command], capture_output=True, text=True, check=False)


@needs_root
def test_as_root_the_folders_made_now_and_the_checkouts_own_become_devs_at_the_top_alone(
    checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (checkout / "workspace" / "roots").mkdir(parents=True)  # there before: stays root's
    made = checkout.parent / "packages"
    config = own_folders(checkout, PACKAGES_DIR=made)
    assert bind_mounts.prepare_mounts(config, checkout) == 0
    owners = {path.name: path.stat().st_uid for path in checkout.rglob("*")}
    assert owners == {"workspace": DEV_UID, "roots": 0, "checkpoints": DEV_UID, "data": 0}
    assert made.stat().st_uid == DEV_UID
    said = capsys.readouterr().err
    assert f"running as root: {checkout / 'checkpoints'} is the container's dev's " in said
    assert "(1000:1000); what you make there as root is dev's to write too (a default ACL)" in said
    assert f"running as root: {made} is the container's dev's (1000:1000)\n" in said
    # What root makes there later (`mkdir` on the host) is dev's to write, and only there.
    (checkout / "workspace" / "mine").mkdir()
    (made / "roots").mkdir()
    assert as_dev("touch", str(checkout / "workspace" / "mine" / "note")).returncode == 0
    assert as_dev("touch", str(made / "roots" / "note")).returncode != 0
    assert bind_mounts.prepare_mounts(config, checkout) == 0  # once done, nothing more to say
    assert "running as root" not in capsys.readouterr().err


@needs_root
def test_as_root_a_folder_it_did_not_make_and_dev_cannot_write_is_refused_with_the_fix(
    checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tool = tmp_path / "opt" / "some-tool"
    (tool / "bin").mkdir(parents=True)
    (tool / "bin" / "tool").write_text("root's\n")
    writable = tmp_path / "shared"
    writable.mkdir(mode=0o777)
    writable.chmod(0o1777)
    config = own_folders(checkout, PACKAGES_DIR=tool)
    config["services"]["workstation"]["volumes"][1]["source"] = str(writable)
    assert bind_mounts.prepare_mounts(config, checkout) == 1
    assert capsys.readouterr().err == (
        f"error: PACKAGES_DIR={tool} is not writable for the container's dev (uid 1000, gid "
        "1000): owned by uid 0, gid 0, mode 755, and `make up` as root hands over only the "
        "folders it makes and this checkout's workspace/ and checkpoints/. Choose a new folder, "
        f"or, if this one is yours to hand over, `chown 1000:1000 {tool}`.\n"
    )
    assert {path.stat().st_uid for path in (tool, tool / "bin", tool / "bin" / "tool")} == {0}
    assert not (checkout / "workspace").exists()  # refused before anything was made


@needs_root
def test_as_root_in_a_checkout_that_is_not_roots_its_folders_are_not_handed_over(
    checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (checkout / "workspace").mkdir()
    os.chown(checkout, 4242, 4242)  # another user's checkout
    assert bind_mounts.prepare_mounts(own_folders(checkout), checkout) == 1
    assert "error: WORKSPACE_DIR=" in capsys.readouterr().err
    assert (checkout / "workspace").stat().st_uid == 0


@needs_root
def test_on_a_filesystem_without_acls_the_user_is_told_once_what_to_do(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_acls(*args: object) -> None:
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(os, "setxattr", no_acls)
    assert bind_mounts.prepare_mounts(own_folders(checkout), checkout) == 0
    said = capsys.readouterr().err
    assert said.count("its filesystem keeps no ACLs") == 2  # workspace/ and checkpoints/
    assert (
        f"running as root: {checkout / 'workspace'} is the container's dev's (1000:1000); "
        "its filesystem keeps no ACLs, so what you make there as root stays root's: make it as "
        "dev (`make shell`), or `chown -R 1000:1000` it\n"
    ) in said
    assert bind_mounts.prepare_mounts(own_folders(checkout), checkout) == 0
    assert "ACL" not in capsys.readouterr().err
