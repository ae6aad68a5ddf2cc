"""`torchrig packages`: list what dev installed, or reset it; never as root."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
from torchrig.packages import cli
from torchrig.shared import kept

from tests.unit.shared.test_kept import VENV, dist_info


def test_list_shows_the_kept_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    site = kept.kept_site(tmp_path / VENV)
    dist_info(site, "torch-ema", "0.3")
    dist_info(site, "six", "1.16.0")
    assert cli.run(argparse.Namespace(action="list"), root=tmp_path) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"Kept packages in {tmp_path / VENV}: 2",
        "  six 1.16.0",
        "  torch-ema 0.3",
    ]


def test_reset_leaves_a_fresh_kept_venv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    dist_info(kept.kept_site(tmp_path / VENV), "six", "1.16.0")
    assert cli.run(argparse.Namespace(action="reset"), root=tmp_path) == 0
    assert "a fresh venv for them is in" in capsys.readouterr().out
    assert (tmp_path / VENV / "pyvenv.cfg").is_file()
    assert kept.kept_dists(kept.kept_site(tmp_path / VENV)) == []


def test_root_is_sent_to_dev(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert cli.run(argparse.Namespace(action="reset"), root=tmp_path) == 2
    assert "run it as dev" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
