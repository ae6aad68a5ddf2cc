"""Root's way into torchrig: the system Python, isolated, on a copy of the package."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from torchrig.image import root_main
from torchrig.shared.startup import Answer

PACKAGE = Path(root_main.__file__).resolve().parents[1]


def launch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The image's layout: <dir>/__main__.py and <dir>/torchrig, run as `python3 -I -S <dir>`,
    from a working directory holding files that shadow what it imports (as /workspace may)."""
    root = tmp_path / "lib-torchrig"
    root.mkdir()
    shutil.copy(root_main.__file__, root / "__main__.py")
    (root / "torchrig").symlink_to(PACKAGE)
    workspace = tmp_path / "workspace"
    (workspace / "torchrig").mkdir(parents=True)
    shadow = "open(__file__ + '.ran', 'w').close()\n"
    (workspace / "random.py").write_text(shadow)  # tempfile, which urllib imports, imports random
    (workspace / "torchrig" / "__init__.py").write_text(shadow)
    return subprocess.run(
        [sys.executable, "-I", "-S", str(root), *args],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_healthcheck_runs_from_the_copy_and_never_from_the_working_directory(
    tmp_path: Path,
) -> None:
    result = launch(tmp_path, "healthcheck")
    assert result.stdout.startswith(("healthy", "unhealthy")), result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in (tmp_path / "workspace").rglob("*.ran")) == []


def test_make_up_s_wait_runs_from_the_copy_and_never_from_the_working_directory(
    tmp_path: Path,
) -> None:
    result = launch(tmp_path, "endpoints", "--wait", "0.2")
    # No workstation runs on this machine: not ready (3); the point is where the code came from.
    assert result.returncode in (0, Answer.WAITED_OUT), result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in (tmp_path / "workspace").rglob("*.ran")) == []


def test_the_build_prints_the_stacks_pins_from_what_the_image_installed(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    for name, version in (("torch", "2.13.0"), ("numpy", "2.4.6"), ("nvidia_nccl_cu13", "2.29.7")):
        dist = site / f"{name}-{version}.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    result = launch(tmp_path, "constraints", str(site))
    assert result.returncode == 0, result.stderr
    pins = [line for line in result.stdout.splitlines() if not line.startswith("#")]
    assert pins == ["nvidia-nccl-cu13==2.29.7", "torch==2.13.0"]


def test_anything_else_is_a_usage_error(tmp_path: Path) -> None:
    result = launch(tmp_path, "bash")
    assert result.returncode == 2
    assert result.stderr.strip() == root_main.USAGE
