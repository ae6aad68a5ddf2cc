"""The kept venv: made and refreshed at start, judged against the image, listed and reset."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from torchrig.shared import kept, places

VERSION = (sys.version_info[0], sys.version_info[1])
VENV = places.KEPT_VENV


def dist_info(site: Path, name: str, version: str, requires: tuple[str, ...] = (),
              installer: str = "pip") -> Path:  # fmt: skip
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    lines = [f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)]
    (folder / "METADATA").write_text("Metadata-Version: 2.1\n" + "\n".join(lines) + "\n")
    (folder / "INSTALLER").write_text(installer + "\n")
    return folder


def test_kept_dists_are_what_the_user_installed_not_the_images_records(tmp_path: Path) -> None:
    dist_info(tmp_path, "torch-ema", "0.3", requires=("torch",))
    dist_info(tmp_path, "six", "1.16.0")
    dist_info(tmp_path, "numpy", "2.4.6", installer=kept.IMAGE_RECORD_INSTALLER)
    found = kept.kept_dists(tmp_path)
    assert [(d.name, d.version) for d in found] == [("six", "1.16.0"), ("torch-ema", "0.3")]


def test_the_python_a_venv_was_made_for_is_read_from_its_pyvenv_cfg(tmp_path: Path) -> None:
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.10.12\n")
    assert kept.venv_version(tmp_path) == (3, 10)
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\nversion_info = 3.12.1\n")  # uv's
    assert kept.venv_version(tmp_path) == (3, 12)
    assert kept.venv_version(tmp_path / "absent") is None


def test_a_kept_venv_of_another_python_is_set_aside_whole_and_a_fresh_one_made(
    tmp_path: Path,
) -> None:
    root = tmp_path / "packages"
    old = root / VENV
    (old / "lib" / "python3.10" / "site-packages").mkdir(parents=True)
    (old / "pyvenv.cfg").write_text("version = 3.10.12\n")
    dist_info(old / "lib" / "python3.10" / "site-packages", "six", "1.16.0")
    (root / f"{VENV}-python3.10").mkdir()  # an earlier one: this one goes beside it
    prepared = kept.prepare(root)
    moved = root / f"{VENV}-python3.10-2"
    assert (moved / "lib" / "python3.10" / "site-packages" / "six-1.16.0.dist-info").is_dir()
    assert kept.venv_version(root / VENV) == VERSION
    assert len(prepared.warnings) == 1
    assert (
        f"made for Python 3.10 and this image runs Python {VERSION[0]}.{VERSION[1]}"
        in (prepared.warnings[0])
    )
    assert f"1 package(s), to {moved} (nothing deleted)" in prepared.warnings[0]
    assert (root / f"{VENV}-python3.10").is_dir()  # the earlier one, left as it was


def test_prepare_makes_the_kept_venv_once_and_refreshes_its_files(tmp_path: Path) -> None:
    root = tmp_path / "packages"
    root.mkdir()
    first = kept.prepare(root, image_prefix="/img")
    prefix = root / VENV
    assert first.prefix == prefix and first.warnings == []
    assert "made a fresh venv" in first.notes[0]
    assert (prefix / "pyvenv.cfg").is_file()
    site = kept.kept_site(prefix)
    assert (
        f"site.addsitedir('{places.site_packages('/img')}')" in (site / kept.IMAGE_PTH).read_text()
    )
    for name in ("pip", "pip3", f"pip{VERSION[0]}.{VERSION[1]}", "uv"):
        script = prefix / "bin" / name
        assert os.access(script, os.X_OK)
        assert script.read_text().startswith(f"#!{prefix}/bin/python\n")
    # A record left by a killed uv run goes; the user's packages stay.
    dist_info(site, "numpy", "2.4.6", installer=kept.IMAGE_RECORD_INSTALLER)
    dist_info(site, "six", "1.16.0")
    again = kept.prepare(root, image_prefix="/img")
    assert again.notes[0].startswith(f"kept packages: 1 in {prefix}")
    assert [d.name for d in kept.kept_dists(site)] == ["six"]
    assert not list(site.glob("numpy-*"))


def test_prepare_on_a_folder_dev_cannot_write_turns_the_kept_packages_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    prepared = kept.prepare(tmp_path)
    assert prepared.prefix is None
    assert (
        "the kept packages are off" in prepared.warnings[0]
        and "PACKAGES_DIR" in (prepared.warnings[0])
    )


def test_reset_removes_everything_and_follows_no_symlink(tmp_path: Path) -> None:
    root = tmp_path / "packages"
    (root / "venv" / "lib").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the kept packages'")
    (root / "link").symlink_to(outside)
    (root / "stray.txt").write_text("x")
    removed = kept.reset(root)
    assert sorted(p.name for p in removed) == ["link", "stray.txt", "venv"]
    assert list(root.iterdir()) == []
    assert (outside / "keep.txt").exists()


def test_a_kept_venv_that_lost_its_python_is_mended(tmp_path: Path) -> None:
    prefix = tmp_path / "venv"
    assert kept.ensure_venv(prefix)
    assert not kept.ensure_venv(prefix)
    (prefix / "bin" / "python").unlink()
    assert kept.ensure_venv(prefix)
    assert (prefix / "bin" / "python").exists()
