"""pip's and uv's wrappers: the override hint after a refusal, the image's records for uv."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from torchrig.packages import wrappers
from torchrig.shared import kept

from tests.unit.shared.test_kept import dist_info
from tests.unit.shared.test_stack import PIP_REFUSAL

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


def test_output_passes_through_and_its_tail_is_kept(capfd: pytest.CaptureFixture[str]) -> None:
    program = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    code, output = wrappers.run_keeping_output([sys.executable, "-c", program])
    assert code == 3
    assert sorted(output.split()) == ["err", "out"]
    shown = capfd.readouterr()
    assert (shown.out, shown.err) == ("out\n", "err\n")


def test_a_refusal_by_the_pins_gets_the_override_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    pins = tmp_path / "constraints.txt"
    pins.write_text("torch==2.13.0\n")
    refusal = tmp_path / "refusal.txt"
    refusal.write_text(PIP_REFUSAL)
    # pip prints the conflict on stdout; the hint comes after it, on stderr.
    program = f"import sys; print(open({str(refusal)!r}).read()); sys.exit(1)"
    run = wrappers.run_keeping_output  # the tool itself is this program
    monkeypatch.setattr(
        wrappers, "run_keeping_output", lambda _: run([sys.executable, "-c", program])
    )
    assert wrappers.main("pip", ["install", "torch==2.12.0"], {}, pins) == 1
    err = capfd.readouterr().err
    assert "[torchrig] kept torch 2.13.0" in err and "`PIP_CONSTRAINT= pip install ...`" in err
    # Any other failure: pip's own message alone.
    program = "raise SystemExit(2)"
    assert wrappers.main("pip", ["install", "nothing"], {}, pins) == 2
    assert "[torchrig]" not in capfd.readouterr().err
