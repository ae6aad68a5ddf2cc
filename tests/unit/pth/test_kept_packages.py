"""The image's `.pth` hook: the kept site-packages in front of the image's, never for root."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from torchrig.pth import kept_packages as sitedir
from torchrig.shared import places


def test_the_kept_venv_has_one_name_and_its_site_packages_the_pythons() -> None:
    assert places.python_tag((3, 12, 1)) == "python3.12"
    assert places.kept_prefix("/opt/packages") == "/opt/packages/venv"
    assert places.site_packages("/opt/venv", (3, 11)) == ("/opt/venv/lib/python3.11/site-packages")


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
    site = Path(places.site_packages(places.kept_prefix(str(root))))
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
    image_site = places.site_packages(image)
    saved_path[:] = ["/stdlib", image_site, "/after"]
    monkeypatch.setattr(os, "getresuid", lambda: (1000, 1000, 1000))
    sitedir.add_kept_packages(str(root), image)
    assert sys.path == ["/stdlib", str(site), str(tmp_path / "editable"), image_site, "/after"]
    sitedir.add_kept_packages(str(root), image)  # a second call (the kept venv's own Python)
    assert sys.path.count(str(site)) == 1


# Root's: any uid 0, also one whose effective uid is dev's (it can set it back to 0).
ROOTS = [(0, 0, 0), (0, 1000, 1000), (1000, 1000, 0), (1000, 0, 1000)]


@pytest.mark.parametrize("uids", ROOTS)
def test_root_never_sees_the_kept_packages(
    uids: tuple[int, int, int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    saved_path: list[str],
) -> None:
    root, _ = kept_tree(tmp_path)
    saved_path[:] = ["/stdlib"]
    monkeypatch.setattr(os, "getresuid", lambda: uids)
    sitedir.add_kept_packages(str(root))
    assert sys.path == ["/stdlib"]


def test_no_kept_site_packages_for_this_python_adds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, saved_path: list[str]
) -> None:
    (tmp_path / "venv" / "lib" / "python2.7").mkdir(parents=True)  # made for another Python
    saved_path[:] = ["/stdlib"]
    monkeypatch.setattr(os, "getresuid", lambda: (1000, 1000, 1000))
    sitedir.add_kept_packages(str(tmp_path))
    assert sys.path == ["/stdlib"]


@pytest.mark.parametrize("uids", [*ROOTS, (1000, 1000, 1000)])
def test_the_images_pth_line_calls_the_hook_unless_root_runs_the_python(
    uids: tuple[int, int, int],
) -> None:
    line = (Path(__file__).parents[3] / "entrypoint" / "torchrig-kept-packages.pth").read_text()
    assert line.count("\n") == 1  # one line: site runs it as one statement
    calls: list[str] = []
    hook = SimpleNamespace(add_kept_packages=lambda: calls.append("hook"))
    modules = {
        "os": SimpleNamespace(getresuid=lambda: uids),
        "torchrig.pth.kept_packages": SimpleNamespace(pth=SimpleNamespace(kept_packages=hook)),
    }
    exec(line, {"__builtins__": {"__import__": lambda name, *_: modules[name]}})
    assert calls == ([] if 0 in uids else ["hook"])
