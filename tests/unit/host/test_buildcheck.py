"""`make build`'s input checks: the extra CA and the CUDA flavour."""

from __future__ import annotations

from pathlib import Path

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
