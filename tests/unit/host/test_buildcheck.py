"""`make build`'s input checks: the extra CA and the CUDA flavour; what the Dockerfile declares
once: the CUDA flavours, their bases, the default."""

from __future__ import annotations

from pathlib import Path

import pytest
from torchrig.host import buildcheck

from .repo import DOCKERFILE, REPO


def test_extra_ca_checks(tmp_path: Path) -> None:
    assert buildcheck.check_extra_ca(None) is None
    assert "does not exist" in buildcheck.check_extra_ca(str(tmp_path / "nope.pem"))
    assert "is not a file" in buildcheck.check_extra_ca(str(tmp_path))
    der = tmp_path / "ca.cer"
    der.write_bytes(b"\x30\x82\x01\x0a")
    assert "no PEM certificate" in buildcheck.check_extra_ca(str(der))
    pem = tmp_path / "ca.pem"
    pem.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    assert buildcheck.check_extra_ca(str(pem)) is None


def test_flavour_needs_a_stage_and_a_lock(tmp_path: Path) -> None:
    assert buildcheck.check_flavour(None, DOCKERFILE, REPO / "locks") is None
    assert "is not one of" in buildcheck.check_flavour("cu999", DOCKERFILE, REPO / "locks")
    assert "make lock CUDA_FLAVOUR=cu128" in buildcheck.check_flavour("cu128", DOCKERFILE, tmp_path)


def test_locked_version_reads_the_pin_and_refuses_ambiguity() -> None:
    lock = "numpy==2.1.0 \\\n    --hash=sha256:ab\ntorch==2.13.0+cu128 ; sys_platform == 'linux'\n"
    assert buildcheck.locked_version(lock, "torch") == "2.13.0+cu128"
    assert buildcheck.locked_version(lock, "torchvision") is None
    two = "torch==2.13.0 ; sys_platform == 'linux'\ntorch==2.12.0 ; sys_platform == 'darwin'\n"
    assert buildcheck.locked_version(two, "torch") is None


def test_the_check_prints_torch_version_from_the_default_lock_s_torch(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(REPO)
    assert buildcheck.main([]) == 0
    lock = (REPO / "locks" / f"{buildcheck.default_flavour(DOCKERFILE)}.txt").read_text()
    (pin,) = [line.split()[0] for line in lock.splitlines() if line.startswith("torch==")]
    assert capsys.readouterr().out == pin.removeprefix("torch==") + "\n"


def test_the_check_fails_with_one_line_for_a_lock_without_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / f"{buildcheck.default_flavour(DOCKERFILE)}.txt").write_text("")
    monkeypatch.chdir(tmp_path)
    assert buildcheck.main([]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: locks/") and "pins no single torch version" in err
    assert err.count("\n") == 1


def test_dockerfile_declares_flavours_once_and_a_default_with_a_lock() -> None:
    flavours = buildcheck.flavours(DOCKERFILE)
    assert len(flavours) == len(set(flavours)) >= 2
    default = buildcheck.default_flavour(DOCKERFILE)
    assert default in flavours
    assert (REPO / "locks" / f"{default}.txt").is_file()


def test_every_flavour_uses_a_slim_base_image() -> None:
    bases = [line for line in DOCKERFILE.splitlines() if line.startswith("FROM nvidia/cuda:")]
    assert len(bases) == len(buildcheck.flavours(DOCKERFILE))  # one base per flavour
    for line in bases:
        assert "-base-ubuntu24.04 AS cuda-cu" in line, line
