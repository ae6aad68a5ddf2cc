"""The image's `.pth` hook: the kept site-packages in front of the image's, never for root."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from torchrig.packages import sitedir


def test_the_kept_venv_has_one_name_and_its_site_packages_the_pythons() -> None:
    assert sitedir.python_tag((3, 12, 1)) == "python3.12"
    assert sitedir.kept_prefix("/opt/packages") == "/opt/packages/venv"
    assert sitedir.site_packages("/opt/venv", (3, 11)) == ("/opt/venv/lib/python3.11/site-packages")


def test_what_the_kept_site_packages_adds_goes_in_front_of_the_images() -> None:
    before = ["", "/usr/lib/python311.zip", "/usr/lib/python3.11", "/img/site", "/img/extra"]
    after = [*before, "/kept/site", "/kept/editable-src"]
    assert sitedir.kept_first(before, after, "/img/site") == [
        "", "/usr/lib/python311.zip", "/usr/lib/python3.11",
        "/kept/site", "/kept/editable-src", "/img/site", "/img/extra",
    ]  # fmt: skip
    # No image site-packages on the path (a Python without it): appended, as site does.
    assert sitedir.kept_first(["/a"], ["/a", "/kept"], "/img/site") == ["/a", "/kept"]


def kept_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A kept root with a site-packages for this Python, holding a .pth that adds a folder."""
    root = tmp_path / "packages"
    site = Path(sitedir.site_packages(sitedir.kept_prefix(str(root))))
    site.mkdir(parents=True)
    (tmp_path / "editable").mkdir()
    (site / "editable.pth").write_text(f"{tmp_path / 'editable'}\n")
    return root, site


@pytest.fixture
def saved_path(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setattr(sys, "path", list(sys.path))
    return sys.path


def test_a_user_sees_the_kept_packages_first_and_their_pth_files_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, saved_path: list[str]
) -> None:
    root, site = kept_tree(tmp_path)
    image = str(tmp_path / "image")
    image_site = sitedir.site_packages(image)
    saved_path[:] = ["/stdlib", image_site, "/after"]
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    sitedir.add_kept_packages(str(root), image)
    assert sys.path == ["/stdlib", str(site), str(tmp_path / "editable"), image_site, "/after"]
    sitedir.add_kept_packages(str(root), image)  # a second call (the kept venv's own Python)
    assert sys.path.count(str(site)) == 1


def test_root_never_sees_the_kept_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, saved_path: list[str]
) -> None:
    root, _ = kept_tree(tmp_path)
    saved_path[:] = ["/stdlib"]
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    sitedir.add_kept_packages(str(root))
    assert sys.path == ["/stdlib"]


def test_no_kept_site_packages_for_this_python_adds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, saved_path: list[str]
) -> None:
    (tmp_path / "venv" / "lib" / "python2.7").mkdir(parents=True)  # made for another Python
    saved_path[:] = ["/stdlib"]
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    sitedir.add_kept_packages(str(tmp_path))
    assert sys.path == ["/stdlib"]


def test_the_images_pth_line_calls_the_hook_for_non_root_only() -> None:
    line = (Path(__file__).parents[3] / "entrypoint" / "torchrig-kept-packages.pth").read_text()
    assert line.startswith("import os; os.geteuid() and ")
    assert "torchrig.packages.sitedir" in line and "add_kept_packages()" in line
    assert line.count("\n") == 1  # one line: site runs it as one statement
