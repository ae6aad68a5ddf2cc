"""The image-publishing workflow (.github/workflows/images.yml) against the files it builds from.

The registry steps can only run on GitHub; what can be checked here is that the workflow builds
the Dockerfile's flavours, tags `latest` on the Dockerfile's default one, and that its lock step
(plain bash, run here for real) reads the torch version the image installs.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import yaml
from torchrig.host import buildcheck

REPO = Path(__file__).resolve().parents[3]
WORKFLOW = REPO / ".github" / "workflows" / "images.yml"
DOCKERFILE = buildcheck.read_dockerfile(REPO / "Dockerfile")


def workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def image_job() -> dict[str, Any]:
    return workflow()["jobs"]["image"]


def step(step_id: str) -> dict[str, Any]:
    (found,) = [s for s in image_job()["steps"] if s.get("id") == step_id]
    return found


def run_lock_step(repo: Path, flavour: str, output: Path) -> subprocess.CompletedProcess[str]:
    """The `lock` step's script as the runner runs it: bash -e, in the checkout, with its env."""
    env = {**os.environ, "FLAVOUR": flavour, "GITHUB_OUTPUT": str(output)}
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step("lock")["run"]],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


def pinned_torch() -> str:
    """torch's version as pyproject.toml pins it (`torch==X`): the one the lock resolved."""
    train = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (pin,) = [spec for spec in train["train"] if spec.startswith("torch==")]
    return pin.removeprefix("torch==")


def test_matrix_is_the_dockerfiles_flavours() -> None:
    assert image_job()["strategy"]["matrix"]["flavour"] == buildcheck.flavours(DOCKERFILE)


def test_latest_goes_to_the_dockerfiles_default_flavour() -> None:
    assert workflow()["env"]["DEFAULT_FLAVOUR"] == buildcheck.default_flavour(DOCKERFILE)
    tags = step("meta")["with"]["tags"]
    assert "type=raw,value=latest,enable=${{ matrix.flavour == env.DEFAULT_FLAVOUR }}" in tags
    assert "type=raw,value=${{ steps.lock.outputs.torch }}-${{ matrix.flavour }}" in tags


def test_lock_step_reads_the_torch_version_the_image_installs(tmp_path: Path) -> None:
    flavour = buildcheck.default_flavour(DOCKERFILE)
    output = tmp_path / "github_output"
    result = run_lock_step(REPO, flavour, output)
    assert result.returncode == 0, result.stdout + result.stderr
    assert outputs(output) == {"build": "true", "torch": pinned_torch()}


def test_lock_step_strips_a_local_version_label(tmp_path: Path) -> None:
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / "cu128.txt").write_text(
        "numpy==2.3.0 \\\n    --hash=sha256:00\ntorch==2.13.0+cu128 \\\n    --hash=sha256:11\n"
    )
    output = tmp_path / "github_output"
    result = run_lock_step(tmp_path, "cu128", output)
    assert result.returncode == 0, result.stderr
    assert outputs(output)["torch"] == "2.13.0"


def test_lock_step_skips_a_flavour_without_a_lock_and_says_how_to_add_one(tmp_path: Path) -> None:
    (tmp_path / "locks").mkdir()
    output = tmp_path / "github_output"
    result = run_lock_step(tmp_path, "cu126", output)
    assert result.returncode == 0, result.stderr
    assert outputs(output) == {"build": "false"}
    assert re.search(r"::notice .*make lock CUDA_FLAVOUR=cu126", result.stdout)


def test_lock_step_fails_on_a_lock_without_torch(tmp_path: Path) -> None:
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / "cu130.txt").write_text("numpy==2.3.0 \\\n    --hash=sha256:00\n")
    result = run_lock_step(tmp_path, "cu130", tmp_path / "github_output")
    assert result.returncode == 1
    assert "::error file=locks/cu130.txt::no torch==<version> line" in result.stdout


def test_every_action_is_pinned_to_a_commit_with_its_release_named() -> None:
    steps = [s for s in image_job()["steps"] if "uses" in s]
    lines = [line.strip() for line in WORKFLOW.read_text().splitlines()]
    pins = [line for line in lines if line.startswith("uses: ")]
    for line in pins:
        assert re.fullmatch(r"uses: [\w-]+/[\w-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+", line), line
    assert len(pins) == len(steps)


def test_build_attaches_sbom_and_provenance_and_uses_the_registry_cache() -> None:
    settings = step("build")["with"]
    assert settings["sbom"] is True
    assert settings["provenance"] == "mode=max"
    assert settings["cache-from"].startswith("type=registry,")
    assert "type=registry,ref={0}:buildcache-{1},mode=max" in settings["cache-to"]
    assert settings["target"] == "runtime"


def test_permissions_are_granted_only_to_the_job() -> None:
    assert workflow()["permissions"] == {}
    assert image_job()["permissions"] == {
        "contents": "read",
        "packages": "write",
        "id-token": "write",
        "attestations": "write",
    }
