"""`make lock`: resolve pyproject's `workstation` extra into locks/<flavour>.txt with uv
(docs/images.md, Flavours and locks)."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from torchrig.host import buildcheck
from torchrig.shared.voice import MAKEFILE as VOICE

PYPI_TORCH_FLAVOUR = "cu130"  # the CUDA build of torch that PyPI itself serves
TORCH_INDEX = "https://download.pytorch.org/whl"
# The lowest Python any supported base has (Debian 12: 3.11; Ubuntu 24.04: 3.12); --universal
# makes the lock valid for every Python from there up.
LOCK_PYTHON = "3.11"
# Packages the lock leaves out or pins differently from what the dependencies ask (with reasons).
OVERRIDES = Path("locks/overrides.txt")


def uv_command(uv: str, flavour: str, output: Path, upgrade: bool = False) -> list[str]:
    command = [
        uv, "pip", "compile", "pyproject.toml",
        "--extra", "workstation",
        "--universal",
        "--python-version", LOCK_PYTHON,
        "--generate-hashes",
        "--no-config",
        "--override", str(OVERRIDES),
        "--custom-compile-command", f"make lock CUDA_FLAVOUR={flavour}",
        "--output-file", str(output),
    ]  # fmt: skip
    if flavour != PYPI_TORCH_FLAVOUR:
        command += ["--index", f"{TORCH_INDEX}/{flavour}", "--emit-index-url"]
    if upgrade:
        command.append("--upgrade")
    return command


def find_uv(given: str) -> str:
    """make's UV (a path, or a name on PATH; its default is the venv's, else PATH's)."""
    if found := shutil.which(given):
        return found
    raise SystemExit(
        "error: uv not found: `pip install uv` (or `make venv`, then `.venv/bin/pip install uv`)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flavour", help="CUDA flavour (default: the Dockerfile's)")
    parser.add_argument("--uv", required=True, help="the uv executable (make's UV)")
    parser.add_argument("--upgrade", action="store_true", help="move every pin to the newest")
    args = parser.parse_args(argv)
    text = buildcheck.read_dockerfile()
    flavour = args.flavour or buildcheck.default_flavour(text)
    known = buildcheck.flavours(text)
    if flavour not in known:
        VOICE.error(
            f"CUDA_FLAVOUR={flavour} has no base stage in the Dockerfile; known: {', '.join(known)}"
        )
        return 2
    command = uv_command(find_uv(args.uv), flavour, Path("locks") / f"{flavour}.txt", args.upgrade)
    VOICE.note("+ " + " ".join(command))
    return subprocess.run(command, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
