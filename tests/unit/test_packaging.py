"""pyproject.toml builds without a deprecation warning (pip shows setuptools' warnings at every
`pip install -e .`): the licence is an SPDX expression with its file (setuptools >= 77)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from email.parser import Parser
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# What the build reads: the files the image's build context has too (.dockerignore).
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE")
BUILD_METADATA = (
    "import sys, warnings\n"
    "warnings.simplefilter('always')\n"
    "from setuptools.build_meta import prepare_metadata_for_build_wheel\n"
    "print(prepare_metadata_for_build_wheel(sys.argv[1]))\n"
)


def test_the_metadata_builds_without_warnings_and_names_the_licence(tmp_path: Path) -> None:
    source, out = tmp_path / "src", tmp_path / "out"
    out.mkdir()
    shutil.copytree(REPO_ROOT / "scripts" / "torchrig", source / "scripts" / "torchrig")
    for name in BUILD_INPUTS:
        shutil.copy(REPO_ROOT / name, source / name)
    result = subprocess.run(
        [sys.executable, "-c", BUILD_METADATA, str(out)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Warning" not in result.stderr, result.stderr[-3000:]
    metadata = Parser().parsestr((out / result.stdout.split()[-1] / "METADATA").read_text())
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE"]
