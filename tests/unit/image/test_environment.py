from __future__ import annotations

import os
from pathlib import Path

import pytest
from torchrig.image import environment


def test_dev_gets_the_kept_venv_first_on_path_once() -> None:
    environ = {"PATH": "/opt/packages/venv/bin:/opt/venv/bin:/usr/bin"}
    prefix = Path("/opt/packages/venv")
    assert environment.kept_environment(environ, prefix) == {
        "PATH": "/opt/packages/venv/bin:/opt/venv/bin:/usr/bin",
        "VIRTUAL_ENV": "/opt/packages/venv",
    }
    assert environment.kept_environment({"PATH": "/usr/bin"}, prefix)["PATH"] == (
        "/opt/packages/venv/bin:/usr/bin"
    )


def test_kept_packages_that_cannot_be_prepared_leave_path_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin")
    assert environment.use_kept_packages(tmp_path / "absent") is None
    assert os.environ["PATH"] == "/usr/bin"
    assert "warning: the kept packages are off" in capsys.readouterr().err


def test_devs_caches_go_on_the_cache_volume_whatever_was_set_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/tmp/elsewhere")
    environment.use_caches(started_as_root=True)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/home/dev/.cache/torchinductor"
    assert os.environ["TRITON_CACHE_DIR"] == "/home/dev/.cache/triton"
    assert os.environ["HF_HOME"] == "/home/dev/.cache/huggingface"


def test_started_as_another_uid_the_caches_follow_its_home_or_the_start_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    environment.use_caches(started_as_root=False)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == f"{tmp_path}/.cache/torchinductor"
    assert capsys.readouterr().err == ""
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    monkeypatch.setenv("HOME", "/")
    environment.use_caches(started_as_root=False)
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    assert "warning: HOME='/': uid" in capsys.readouterr().err
