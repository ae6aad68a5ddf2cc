"""The image's stack (torch, torchvision, triton, nvidia-*) is protected: an install that would
replace it is refused before anything is downloaded, by pip, uv and %pip alike, naming the pinned
version; torch stays as it was. The override itself works (shown with --dry-run: no gigabytes
fetched)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import paramiko
import pytest

from . import ssh
from .conftest import running
from .kernel import run_in_a_kernel
from .stack import Stack

pytestmark = [pytest.mark.container, pytest.mark.timeout(600, func_only=True)]

OTHER_TORCH = "torch==2.12.0"
# A package that needs another torch than the image's: torchaudio 2.5.1 requires torch==2.5.1.
NEEDS_OTHER_TORCH = "torchaudio==2.5.1"
# pip's "Downloading torch-2.12.0-...whl", uv's "Downloading torch (870.1MiB)".
TORCH_FETCHED = re.compile(r"Download\w* torch(-\d| \()")
TORCH_AS_IT_WAS = "import torch; print(torch.__version__.split('+')[0], torch.__file__)"


@pytest.fixture(scope="module")
def stack(make_stack_in, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running(make_stack_in(tmp_path_factory.mktemp("protected"))) as started:
        yield started


@pytest.fixture(scope="module")
def image_torch(session: paramiko.SSHClient) -> str:
    result = ssh.run(session, f"python -c {TORCH_AS_IT_WAS!r}")
    assert result.exit_code == 0, result.stderr
    version, where = result.stdout.split()
    assert where.startswith("/opt/venv/lib/")
    return version


@pytest.mark.parametrize(
    "command",
    [
        f"pip install --no-input {OTHER_TORCH}",
        f"pip install --no-input {NEEDS_OTHER_TORCH}",
        f"uv pip install {OTHER_TORCH}",
        f"uv pip install {NEEDS_OTHER_TORCH}",
    ],
)
def test_an_install_that_would_replace_torch_is_refused_naming_the_pin(
    session: paramiko.SSHClient, image_torch: str, command: str
) -> None:
    refused = ssh.run(session, command, timeout_s=120)
    said = refused.stdout + refused.stderr
    assert refused.exit_code != 0, said
    assert f"torch=={image_torch}" in said, said
    assert not TORCH_FETCHED.search(said), said
    after = ssh.run(session, f"python -c {TORCH_AS_IT_WAS!r}")
    assert after.stdout.split()[0] == image_torch
    assert after.stdout.split()[1].startswith("/opt/venv/lib/")


def test_pip_in_a_notebook_is_refused_too_and_torch_stays(stack: Stack, image_torch: str) -> None:
    install, check = run_in_a_kernel(
        stack, f"%pip install --no-input {OTHER_TORCH}", TORCH_AS_IT_WAS
    )
    assert f"(constraint) torch=={image_torch}" in install.output, install
    assert "ResolutionImpossible" in install.output
    assert check.output.split()[0] == image_torch


@pytest.mark.parametrize(
    ("command", "would"),
    [
        (f"PIP_CONSTRAINT= pip install --dry-run --no-deps {OTHER_TORCH}",
         "Would install torch-2.12.0"),
        (f"UV_CONSTRAINT= uv pip install --dry-run --no-deps {OTHER_TORCH}",
         " + torch==2.12.0"),
    ],
)  # fmt: skip
def test_the_override_lifts_the_pins(session: paramiko.SSHClient, command: str, would: str) -> None:
    result = ssh.run(session, command, timeout_s=300)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert would in result.stdout + result.stderr


def test_in_a_notebook_the_override_is_an_empty_pip_constraint(stack: Stack) -> None:
    unset, install = run_in_a_kernel(
        stack,
        "%env PIP_CONSTRAINT=",
        f"%pip install --no-input --dry-run --no-deps {OTHER_TORCH}",
    )
    assert unset.error == "", unset
    assert "Would install torch-2.12.0" in install.output, install
