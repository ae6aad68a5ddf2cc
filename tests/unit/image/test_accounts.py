from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from torchrig.image import accounts
from torchrig.image.settings import SetupError, read_settings

PASSWD = (
    "root:x:0:0:root:/root:/bin/bash\n"
    "_apt:x:42:65534::/nonexistent:/usr/sbin/nologin\n"
    "dev:x:1000:1000::/home/dev:/bin/bash\n"
)
GROUP = "root:x:0:\nusers:x:100:dev\ndev:x:1000:\n"


def test_same_ids_change_nothing() -> None:
    remap = accounts.plan_remap(PASSWD, GROUP, 1000, 1000)
    assert not remap.changed
    assert accounts.plan_remap(PASSWD, GROUP, None, None).changed is False


def test_remap_rewrites_only_devs_lines() -> None:
    remap = accounts.plan_remap(PASSWD, GROUP, 1234, 2345)
    assert remap.changed
    assert "dev:x:1234:2345::/home/dev:/bin/bash\n" in remap.passwd
    assert "dev:x:2345:\n" in remap.group
    assert "root:x:0:0:root:/root:/bin/bash\n" in remap.passwd
    assert "users:x:100:dev\n" in remap.group  # supplementary membership kept


def test_uid_only_keeps_the_group() -> None:
    remap = accounts.plan_remap(PASSWD, GROUP, 1234, None)
    assert "dev:x:1234:1000:" in remap.passwd
    assert remap.group == GROUP


def test_a_uid_another_account_has_is_shared_and_dev_comes_first() -> None:
    # A host user's files carry their uid whatever the image calls it (33 is www-data).
    remap = accounts.plan_remap(PASSWD, GROUP, 42, None)
    lines = remap.passwd.splitlines()
    assert lines == [
        "root:x:0:0:root:/root:/bin/bash",
        "dev:x:42:1000::/home/dev:/bin/bash",  # first: uid 42 -> name lookups now say dev
        "_apt:x:42:65534::/nonexistent:/usr/sbin/nologin",
    ]
    assert remap.group == GROUP


@pytest.mark.parametrize("gid", [100, 42])
def test_a_gid_another_group_has_becomes_devs_primary_group(gid: int) -> None:
    # openSUSE and many LDAP sites give users group 100 (`users`); macOS gives 20 (`staff`).
    group = GROUP + "shadow:x:42:\n"
    remap = accounts.plan_remap(PASSWD, group, None, gid)
    assert f"dev:x:1000:{gid}::/home/dev:/bin/bash\n" in remap.passwd
    assert remap.group == group  # no second group with that gid, `dev` left as it was


def test_a_shared_primary_group_is_not_also_listed_as_supplementary(tmp_path: Path) -> None:
    (tmp_path / "passwd").write_text(PASSWD)
    (tmp_path / "group").write_text(GROUP)
    assert accounts.apply_remap(33, 100, etc=tmp_path)
    who = accounts.identity(etc=tmp_path)
    assert (who.uid, who.gid, who.groups) == (33, 100, ())


@pytest.mark.parametrize(("uid", "gid", "message"), [
    (0, None, r"^PUID=0 would make dev root: .*GRANT_SUDO=1.*`id -u`"),
    (None, 0, r"^PGID=0 would put dev in the group root: .*`id -g`"),
])  # fmt: skip
def test_root_ids_are_refused(uid: int | None, gid: int | None, message: str) -> None:
    with pytest.raises(SetupError, match=message):
        accounts.plan_remap(PASSWD, GROUP, uid, gid)


def test_apply_remap_writes_files_atomically_with_their_mode(tmp_path: Path) -> None:
    (tmp_path / "passwd").write_text(PASSWD)
    (tmp_path / "group").write_text(GROUP)
    os.chmod(tmp_path / "passwd", 0o644)
    assert accounts.apply_remap(1500, 1500, etc=tmp_path)
    assert "dev:x:1500:1500:" in (tmp_path / "passwd").read_text()
    assert (tmp_path / "passwd").stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["group", "passwd"]
    assert not accounts.apply_remap(1500, 1500, etc=tmp_path)


def test_identity_lists_supplementary_groups(tmp_path: Path) -> None:
    (tmp_path / "passwd").write_text(PASSWD)
    (tmp_path / "group").write_text(GROUP)
    who = accounts.identity(etc=tmp_path)
    assert (who.uid, who.gid, who.groups, who.home) == (1000, 1000, (100,), "/home/dev")


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
DEV = accounts.Identity(4321, 4322, (), "/home/dev", "/bin/bash")


def owner(path: Path) -> tuple[int, int]:
    found = path.lstat()
    return found.st_uid, found.st_gid


@needs_root
def test_only_the_top_changes_owner_never_what_is_in_it(tmp_path: Path) -> None:
    # dev hard-links root's file into /run/torchrig (fs.protected_hardlinks=0), then makes the
    # container restart: the start changes the folder's top, so root's file stays root's.
    roots = tmp_path / "roots-start-up-module.py"
    roots.write_text("root's code")
    state = tmp_path / "run-torchrig"
    (state / "sub").mkdir(parents=True)
    os.link(roots, state / "planted")
    assert accounts.hand_top_to(state, DEV) == accounts.Top((0, 0), changed=True)
    assert owner(state) == (4321, 4322)
    assert {owner(path) for path in (roots, state / "planted", state / "sub")} == {(0, 0)}
    assert accounts.hand_top_to(state, DEV) is None  # dev's already: nothing to do


@needs_root
def test_a_symlink_is_never_followed_and_a_folder_with_files_is_left_when_asked(
    tmp_path: Path,
) -> None:
    # dev owns /home/dev: a symlink planted at ~/.cache must not hand root's folder to dev.
    roots = tmp_path / "roots-empty-dir"
    roots.mkdir()
    (tmp_path / "cache").symlink_to(roots)
    assert accounts.hand_top_to(tmp_path / "cache", DEV) is None
    assert accounts.hand_top_to(tmp_path / "missing", DEV) is None
    assert owner(roots) == (0, 0)
    (roots / "file").write_text("x")
    assert accounts.hand_top_to(roots, DEV, only_if_empty=True) == accounts.Top((0, 0), False)
    assert owner(roots) == (0, 0)


@needs_root
def test_after_a_remap_the_home_the_image_made_is_devs_and_nothing_more(tmp_path: Path) -> None:
    skel, home = tmp_path / "skel", tmp_path / "home"
    skel.mkdir()
    (skel / ".bashrc").write_text("# skel\n")
    (home / ".ssh").mkdir(parents=True)
    (home / ".cache").mkdir()  # a volume's mount point: its own rule
    (home / ".bashrc").write_text("# skel\n")
    (home / "other").write_text("not the image's")
    accounts.hand_home_to(DEV, home, skel)
    changed = {path.name for path in (home, *home.iterdir()) if owner(path) == (4321, 4322)}
    assert changed == {"home", ".ssh", ".bashrc"}


STATUS = "Name:\tpython3\nUmask:\t0022\nNoNewPrivs:\t{flag}\nSeccomp:\t2\n"


def status_file(tmp_path: Path, flag: int) -> Path:
    path = tmp_path / "status"
    path.write_text(STATUS.format(flag=flag))
    return path


def test_the_flag_is_read_from_the_status_file(tmp_path: Path) -> None:
    assert accounts.no_new_privileges(status_file(tmp_path, 1))
    assert not accounts.no_new_privileges(status_file(tmp_path, 0))


def test_setting_it_holds_for_the_process_and_what_it_starts() -> None:
    # In a child: the flag can never be unset, and the test session must keep its own.
    program = (
        "import subprocess\n"
        "from torchrig.image import accounts\n"
        "accounts.set_no_new_privileges()\n"
        "print(accounts.no_new_privileges())\n"
        "print(subprocess.run(['grep', 'NoNewPrivs', '/proc/self/status'],"
        " capture_output=True, text=True).stdout.split()[-1])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["True", "1"]


def test_grant_sudo_under_no_new_privileges_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(SetupError, match=r"^GRANT_SUDO=1, but the container runs with no-new"):
        accounts.check_sudo_possible(True, status_file(tmp_path, 1))
    accounts.check_sudo_possible(True, status_file(tmp_path, 0))
    accounts.check_sudo_possible(False, status_file(tmp_path, 1))


def test_sudo_is_set_up_only_while_it_is_granted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sudoers = tmp_path / "torchrig-dev"
    accounts.configure_sudo(True, sudoers)
    assert sudoers.read_text() == "dev ALL=(ALL:ALL) NOPASSWD: ALL\n"
    assert sudoers.stat().st_mode & 0o777 == 0o440
    assert "GRANT_SUDO=1: dev may use sudo without a password" in capsys.readouterr().err
    accounts.configure_sudo(False, sudoers)  # a later start without it takes it back
    assert not sudoers.exists()
    accounts.configure_sudo(False, sudoers)  # nothing to take back: fine
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("environ", "ignored"),
    [
        ({}, None),
        ({"PUID": "1234", "GRANT_SUDO": "1"}, "; PUID, GRANT_SUDO ignored (they need the"),
    ],
)
def test_a_start_as_another_uid_says_what_it_skipped_and_ignored(
    capsys: pytest.CaptureFixture[str], environ: dict[str, str], ignored: str | None
) -> None:
    accounts.note_unprivileged(read_settings(environ))
    said = capsys.readouterr().err
    assert f"started as uid {os.getuid()} (not root): user remap and sudo set-up skipped" in said
    assert (ignored in said) if ignored else ("ignored" not in said)
