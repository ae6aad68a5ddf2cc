"""The workspace's copy of the examples: made from the image's at a start whose workspace has
none, and never touched again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from torchrig.image import examples


def image_examples(tmp_path: Path) -> Path:
    source = tmp_path / "image"
    source.mkdir()
    (source / "train_ddp.py").write_text("print('the image's example')\n")
    return source


def test_a_workspace_without_examples_gets_the_images(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "workspace" / "examples"
    target.parent.mkdir()
    examples.copy_to_workspace(image_examples(tmp_path), target)
    assert (target / "train_ddp.py").read_text() == "print('the image's example')\n"
    assert (target / "train_ddp.py").stat().st_uid == os.getuid()
    assert "copied the examples to" in capsys.readouterr().err


@pytest.mark.parametrize("own", ["folder", "dangling symlink"])
def test_a_workspace_with_its_own_is_left_as_it_is(tmp_path: Path, own: str) -> None:
    target = tmp_path / "examples"
    target.mkdir() if own == "folder" else target.symlink_to(tmp_path / "nowhere")
    examples.copy_to_workspace(image_examples(tmp_path), target)
    assert not (tmp_path / "nowhere").exists() and not (target / "train_ddp.py").exists()


def test_a_workspace_dev_cannot_write_is_left_without_a_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # a read-only image (Apptainer)
    examples.copy_to_workspace(image_examples(tmp_path), tmp_path / "examples")
    assert not (tmp_path / "examples").exists()
    assert capsys.readouterr().err == ""
