"""The minimum-driver table and the one "driver too old for torch's CUDA" verdict."""

from __future__ import annotations

import pytest
from torchrig.facts import cuda_compat
from torchrig.facts.verdict import Verdict


@pytest.mark.parametrize(
    ("driver", "cuda", "supported"),
    [
        ("580.65.06", "13.0", True),
        ("575.51.03", "13.0", False),
        ("525.60.13", "12.8", True),
        ("525.53", "12.4", False),
        ("580.65.06", "99.0", None),
    ],
)
def test_driver_supports_cuda(driver: str, cuda: str, supported: bool | None) -> None:
    assert cuda_compat.driver_supports_cuda(driver, cuda) is supported


def test_versions_are_written_as_nvidias_table_writes_them() -> None:
    assert cuda_compat.version_text((580, 0)) == "580"
    assert cuda_compat.version_text((525, 60)) == "525.60"
    assert cuda_compat.version_text((450, 8)) == "450.08"


def test_a_new_enough_driver_passes() -> None:
    check = cuda_compat.check_driver("580.65.06", "13.0", driver_cuda="13.0")
    assert check.verdict is Verdict.PASS
    assert check.data == {
        "driver": "580.65.06",
        "cuda_build": "13.0",
        "driver_cuda": "13.0",
        "minimum": "580",
    }


def test_a_driver_that_runs_only_a_cuda_the_image_has_no_flavour_for_must_be_upgraded() -> None:
    # 470 runs CUDA 11, but the image is built for CUDA 12 or 13 only: rebuilding is no way out.
    check = cuda_compat.check_driver("470.1", "13.0")
    assert check.verdict is Verdict.FAIL
    assert (check.fix or "").startswith("update the host's NVIDIA driver to >= 580: ")
    assert "must be upgraded" in (check.fix or "")
    assert "CUDA_FLAVOUR" not in (check.fix or "")


def test_the_rebuild_names_the_newest_flavour_the_driver_runs_and_its_minimum() -> None:
    check = cuda_compat.check_driver("570.86.10", "13.0", image_flavour="cu130")
    assert check.summary == (
        "driver 570.86.10 is older than 580, the minimum for CUDA 13.0 "
        "(image built with CUDA_FLAVOUR=cu130)"
    )
    assert check.fix == (
        "update the host's NVIDIA driver to >= 580, or rebuild the image for CUDA 12: "
        "`make build CUDA_FLAVOUR=cu128` (CUDA 12 needs >= 525.60)"
    )


def test_versions_that_are_not_numbers_warn_instead_of_raising() -> None:
    check = cuda_compat.check_driver("580.x", "13.0")
    assert check.verdict is Verdict.WARN
    assert "cannot compare" in check.summary


def test_a_cuda_missing_from_the_table_warns_naming_this_file() -> None:
    check = cuda_compat.check_driver("580.65.06", "99.0")
    assert check.verdict is Verdict.WARN
    assert "torchrig/facts/cuda_compat.py" in (check.fix or "")


def test_the_image_flavour_comes_from_the_images_environment() -> None:
    assert cuda_compat.image_flavour({"TORCHRIG_CUDA_FLAVOUR": "cu128"}) == "cu128"
    assert cuda_compat.image_flavour({"TORCHRIG_CUDA_FLAVOUR": ""}) is None
    assert cuda_compat.image_flavour({}) is None


def test_every_flavour_names_a_cuda_major_with_a_known_minimum() -> None:
    assert set(cuda_compat.FLAVOUR_BY_CUDA_MAJOR) <= set(cuda_compat.MIN_DRIVER_BY_CUDA_MAJOR)
