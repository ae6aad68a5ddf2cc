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


def test_fresh_mount_claim_only_takes_empty_root_owned_dirs(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    if os.geteuid() == 0:
        os.chown(empty, 1234, 1234)  # owned by someone: not Docker's fresh root-owned dir
    assert not accounts.claim_if_fresh_mount(empty, 4321, 4321)
    assert not accounts.claim_if_fresh_mount(tmp_path / "missing", 4321, 4321)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_chown_tree_as_root(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_text("x")
    accounts.chown_tree(tmp_path / "a", 4321, 4322)
    for path in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "f"):
        assert (path.stat().st_uid, path.stat().st_gid) == (4321, 4322)
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    os.chown(fresh, 0, 0)
    assert accounts.claim_if_fresh_mount(fresh, 4321, 4321)
    assert fresh.stat().st_uid == 4321
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert not accounts.claim_if_fresh_mount(tmp_path / "full", 4321, 4321)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_fresh_mount_claim_never_follows_a_symlink(tmp_path: Path) -> None:
    # dev owns /home/dev: a symlink planted at ~/.cache must not hand root's dir to dev.
    target = tmp_path / "roots-empty-dir"
    target.mkdir()
    os.chown(target, 0, 0)
    link = tmp_path / "cache"
    link.symlink_to(target)
    assert not accounts.claim_if_fresh_mount(link, 4321, 4321)
    assert target.stat().st_uid == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_chown_tree_changes_links_not_what_they_point_to(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("x")
    home = tmp_path / "home"
    (home / "sub").mkdir(parents=True)
    (home / "sub" / "to-dir").symlink_to(outside)
    (home / "to-file").symlink_to(outside / "secret")
    accounts.chown_tree(home, 4321, 4322)
    assert os.lstat(home / "sub" / "to-dir").st_uid == 4321
    assert os.lstat(home / "to-file").st_uid == 4321
    for path in (outside, outside / "secret"):
        assert path.stat().st_uid == 0, path


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_chown_tree_leaves_a_root_file_hard_linked_into_the_tree_to_root(tmp_path: Path) -> None:
    # dev hard-links root's file into /run/torchrig (fs.protected_hardlinks=0), then makes the
    # container restart: the start's chown_tree must not hand root's file to dev.
    roots = tmp_path / "roots-start-up-module.py"
    roots.write_text("root's code")
    os.chown(roots, 0, 0)
    state = tmp_path / "run-torchrig"
    state.mkdir()
    (state / "services").write_text("jupyter")
    os.link(roots, state / "planted")
    left = accounts.chown_tree(state, 4321, 4322)
    assert left == [state / "planted"]
    assert roots.stat().st_uid == 0
    assert (state / "services").stat().st_uid == 4321


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


def test_each_file_left_to_its_owner_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = accounts.Identity(4321, 4322, (), "/home/dev", "/bin/bash")
    asked: list[tuple[Path, int, int]] = []

    def chown_tree(root: Path, uid: int, gid: int) -> list[Path]:
        asked.append((root, uid, gid))
        return [root / "planted"]

    monkeypatch.setattr(accounts, "chown_tree", chown_tree)
    accounts.hand_to_dev(tmp_path, dev)
    assert asked == [(tmp_path, 4321, 4322)]
    assert f"warning: left {tmp_path}/planted to its owner: it has other hard links" in (
        capsys.readouterr().err
    )


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
