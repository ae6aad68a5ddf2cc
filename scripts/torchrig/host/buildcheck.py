"""`make build` checks its inputs first, so a typo fails with a sentence, not a BuildKit trace.

Then it prints PYTORCH_VERSION from the lock: enroot's PyTorch hook (pyxis on Slurm) fills in
torch's distributed variables only in images that set it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from torchrig.shared.voice import MAKEFILE as VOICE

PEM_MARKER = "-----BEGIN CERTIFICATE-----"
FLAVOUR_STAGE = re.compile(r"^FROM\s+\S+\s+AS\s+cuda-(\w+)\s*$", re.MULTILINE | re.IGNORECASE)
DEFAULT_FLAVOUR = re.compile(r"^ARG\s+CUDA_FLAVOUR=(\w+)\s*$", re.MULTILINE)


def flavours(dockerfile_text: str) -> list[str]:
    return FLAVOUR_STAGE.findall(dockerfile_text)


def default_flavour(dockerfile_text: str) -> str:
    match = DEFAULT_FLAVOUR.search(dockerfile_text)
    if match is None:
        raise ValueError("the Dockerfile declares no `ARG CUDA_FLAVOUR=<default>`")
    return match.group(1)


def read_dockerfile(path: Path = Path("Dockerfile")) -> str:
    return path.read_text(encoding="utf-8")


def check_extra_ca(value: str | None) -> str | None:
    """None when fine (unset is fine), else the problem and its fix."""
    if not value:
        return None
    path = Path(value)
    if not path.exists():
        return f"EXTRA_CA_CERT={value} does not exist: give the path of your proxy's CA (PEM)."
    if not path.is_file():
        return f"EXTRA_CA_CERT={value} is not a file: give the path of a PEM certificate."
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"EXTRA_CA_CERT={value} cannot be read: {exc.strerror}."
    if PEM_MARKER not in text:
        return (
            f"EXTRA_CA_CERT={value} holds no PEM certificate ({PEM_MARKER} missing): convert a "
            "DER file with `openssl x509 -inform der -in ca.cer -out ca.pem`."
        )
    return None


def check_flavour(value: str | None, dockerfile_text: str, locks: Path) -> str | None:
    flavour = value or default_flavour(dockerfile_text)
    known = flavours(dockerfile_text)
    if flavour not in known:
        return f"CUDA_FLAVOUR={flavour} is not one of {', '.join(known)}."
    if not (locks / f"{flavour}.txt").is_file():
        return (
            f"there is no lock for CUDA_FLAVOUR={flavour} (locks/{flavour}.txt): "
            f"create it with `make lock CUDA_FLAVOUR={flavour}`."
        )
    return None


def locked_version(lock_text: str, package: str) -> str | None:
    """The one version a lock pins `package` to; None for none or several (under markers)."""
    pattern = re.compile(rf"^{re.escape(package)}==([^\s;\\]+)", re.MULTILINE)
    versions = set(pattern.findall(lock_text))
    return versions.pop() if len(versions) == 1 else None


def torch_version(environ: Mapping[str, str], dockerfile_text: str, locks: Path) -> str:
    """torch's version in the chosen flavour's lock (check_flavour has found the lock)."""
    flavour = environ.get("CUDA_FLAVOUR") or default_flavour(dockerfile_text)
    lock = locks / f"{flavour}.txt"
    version = locked_version(lock.read_text(encoding="utf-8"), "torch")
    if version is None:
        raise ValueError(f"{lock} pins no single torch version: re-create it with `make lock`.")
    return version


def checked_torch_version(environ: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """(torch's version for PYTORCH_VERSION, []) or (None, the problems with the build's inputs)."""
    dockerfile_text, locks = read_dockerfile(), Path("locks")
    checked = (
        check_extra_ca(environ.get("EXTRA_CA_CERT")),
        check_flavour(environ.get("CUDA_FLAVOUR"), dockerfile_text, locks),
    )
    found = [problem for problem in checked if problem]
    if found:
        return None, found
    try:
        return torch_version(environ, dockerfile_text, locks), []
    except ValueError as exc:
        return None, [str(exc)]


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    version, found = checked_torch_version(os.environ)
    if version:
        print(version)
    for problem in found:
        VOICE.error(problem)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
