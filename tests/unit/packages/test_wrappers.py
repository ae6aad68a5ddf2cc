"""pip's and uv's wrappers: the image's records for uv."""

from __future__ import annotations

from pathlib import Path

import pytest
from torchrig.packages import wrappers
from torchrig.shared import kept

from tests.unit.shared.test_kept import dist_info

KEPT = Path("/opt/packages/venv")


@pytest.mark.parametrize(
    ("args", "command"),
    [(["pip", "install", "x"], "install"), (["--verbose", "pip", "-q", "list"], "list"),
     (["venv", "x"], None), (["pip"], None), (["run", "pip", "install"], None)],
)  # fmt: skip
def test_the_uv_pip_subcommand_is_found(args: list[str], command: str | None) -> None:
    assert wrappers.uv_pip_command(args) == command


def test_uv_gets_the_images_records_only_for_the_kept_venv() -> None:
    env = {"VIRTUAL_ENV": str(KEPT)}
    assert wrappers.uv_needs_image_records(["pip", "install", "x"], env, KEPT)
    assert wrappers.uv_needs_image_records(["pip", "list"], env, KEPT)
    assert not wrappers.uv_needs_image_records(["pip", "uninstall", "x"], env, KEPT)
    assert not wrappers.uv_needs_image_records(["pip", "compile", "r.in"], env, KEPT)
    assert not wrappers.uv_needs_image_records(["venv", "/tmp/v"], env, KEPT)
    for other in (["--python", "/usr/bin/python3"], ["--system"], ["--target=/t"], ["-p", "3.12"]):
        assert not wrappers.uv_needs_image_records(["pip", "install", *other, "x"], env, KEPT)
    assert not wrappers.uv_needs_image_records(["pip", "install", "x"], {}, KEPT)
    elsewhere = {"VIRTUAL_ENV": "/home/dev/project/.venv"}
    assert not wrappers.uv_needs_image_records(["pip", "install", "x"], elsewhere, KEPT)


def test_the_images_records_stand_in_for_what_the_kept_venv_lacks_and_go_again(
    tmp_path: Path,
) -> None:
    image, site = tmp_path / "image", tmp_path / "kept"
    dist_info(image, "torch", "2.13.0", requires=("filelock",))
    dist_info(image, "numpy", "2.4.6")
    dist_info(site, "numpy", "2.4.5")  # the user's upgrade: the image's numpy is not recorded
    with wrappers.image_records(site, image):
        record = site / "torch-2.13.0.dist-info"
        assert (record / "METADATA").read_text() == (
            image / "torch-2.13.0.dist-info" / "METADATA"
        ).read_text()
        assert (record / "RECORD").read_text().splitlines() == [
            f"torch-2.13.0.dist-info/{name},," for name in ("METADATA", "INSTALLER", "RECORD")
        ]
        assert sorted(p.name for p in site.iterdir()) == [
            "numpy-2.4.5.dist-info",
            "torch-2.13.0.dist-info",
        ]
        assert [d.name for d in kept.kept_dists(site)] == ["numpy"]  # records are not kept ones
    assert sorted(p.name for p in site.iterdir()) == ["numpy-2.4.5.dist-info"]
