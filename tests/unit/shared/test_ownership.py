"""The one rule for handing a tree to another owner as root (both sides of Docker use it): no
symlink followed, no multiply-linked regular file handed over, the file checked is the file
changed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from torchrig.shared import ownership
from torchrig.shared.ownership import MAX_ID, parse_id

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def walk(top: Path, **options: object) -> ownership.Handover:
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return ownership.hand_over_tree(fd, 4321, 4322, **options)  # type: ignore[arg-type]
    finally:
        os.close(fd)


@pytest.fixture
def roots_file(tmp_path: Path) -> Iterator[Path]:
    """A file outside the tree, standing for root's own (its owner must never change)."""
    path = tmp_path / "roots-file"
    path.write_text("root's")
    os.chown(path, 0, 0)
    yield path
    assert path.stat().st_uid == 0, "root's file was handed over"


@needs_root
def test_every_entry_changes_owner_and_the_walk_counts_them(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "file").write_text("x")
    os.mkfifo(tree / "fifo")
    handover = walk(tree)
    assert (handover.changed, handover.left_alone) == (3, [])
    for path in (tree / "sub", tree / "sub" / "file", tree / "fifo"):
        assert (path.lstat().st_uid, path.lstat().st_gid) == (4321, 4322), path


@needs_root
def test_a_hard_link_to_anothers_file_is_left_alone_and_named(
    tmp_path: Path, roots_file: Path
) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    os.link(roots_file, tree / "sub" / "link")
    handover = walk(tree)
    assert handover.left_alone == ["sub/link"]
    assert (tree / "sub").stat().st_uid == 4321


@needs_root
def test_symlinks_change_owner_and_what_they_point_to_does_not(
    tmp_path: Path, roots_file: Path
) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "to-file").symlink_to(roots_file)
    (tree / "to-dir").symlink_to(tmp_path)
    walk(tree)
    assert os.lstat(tree / "to-file").st_uid == 4321
    assert tmp_path.stat().st_uid == 0


@needs_root
def test_a_file_swapped_for_a_hard_link_after_its_check_is_not_handed_over(
    tmp_path: Path, roots_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tree's owner swaps its own one-link file for a link to root's between the walk's lstat
    # and its change: the descriptor the change goes through is the file that is counted.
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "mine").write_text("mine")
    real_open = os.open

    def swap_then_open(name: str, flags: int, *args: object, **kwargs: object) -> int:
        if name == "mine":
            os.unlink(tree / "mine")
            os.link(roots_file, tree / "mine")
        return real_open(name, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", swap_then_open)
    handover = walk(tree)
    assert handover.left_alone == ["mine"]


@needs_root
def test_only_owner_changes_that_owners_entries_only(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "roots").write_text("x")
    (tree / "someones").write_text("x")
    os.chown(tree / "someones", 1111, 1111)
    handover = walk(tree, only_owner=0)
    assert handover.changed == 1
    assert (tree / "roots").stat().st_uid == 4321
    assert (tree / "someones").stat().st_uid == 1111


def test_linked_elsewhere_means_a_regular_file_with_more_than_one_link(tmp_path: Path) -> None:
    (tmp_path / "one").write_text("x")
    os.link(tmp_path / "one", tmp_path / "two")
    (tmp_path / "dir").mkdir()
    assert ownership.linked_elsewhere(os.lstat(tmp_path / "one"))
    assert not ownership.linked_elsewhere(os.lstat(tmp_path / "dir"))  # a dir's own links
    (tmp_path / "two").unlink()
    assert not ownership.linked_elsewhere(os.lstat(tmp_path / "one"))


@pytest.mark.parametrize("value", [None, "", "  "])
def test_unset_or_empty_means_keep_the_image_default(value: str | None) -> None:
    assert parse_id("PUID", value) is None


def test_a_number_is_read_with_surrounding_blanks_dropped() -> None:
    assert parse_id("PGID", " 1001 ") == 1001
    assert parse_id("PUID", str(MAX_ID)) == MAX_ID


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "0x10", str(MAX_ID + 1)])
def test_anything_else_names_the_variable_and_the_command_to_fix_it(value: str) -> None:
    with pytest.raises(ValueError, match=rf"^PUID={value!r} is not a numeric id: .*`id -u`"):
        parse_id("PUID", value)
    with pytest.raises(ValueError, match=r"`id -g` on the host"):
        parse_id("PGID", value)


# str.isdigit() is true for these, and int() even reads the full-width and Arabic-Indic ones;
# a Unicode digit is never what `id -u` printed.
@pytest.mark.parametrize("value", ["\u00b2", "\uff11\uff12\uff13\uff14", "\u0663\u0663", "1\u00b2"])
def test_only_ascii_digits_are_an_id(value: str) -> None:
    with pytest.raises(ValueError, match=rf"^PUID={value!r} is not a numeric id: .*`id -u`"):
        parse_id("PUID", value)
