"""`make build` checks its inputs first, so a typo fails with a sentence, not a BuildKit trace.

EXTRA_CA_CERT must name a readable PEM certificate file; the chosen CUDA flavour must have a
base stage and a lock.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from torchrig.host import dockerfile_facts

PEM_MARKER = "-----BEGIN CERTIFICATE-----"


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
    flavour = value or dockerfile_facts.default_flavour(dockerfile_text)
    known = dockerfile_facts.flavours(dockerfile_text)
    if flavour not in known:
        return f"CUDA_FLAVOUR={flavour} is not one of {', '.join(known)}."
    if not (locks / f"{flavour}.txt").is_file():
        return (
            f"there is no lock for CUDA_FLAVOUR={flavour} (locks/{flavour}.txt): "
            f"create it with `make lock CUDA_FLAVOUR={flavour}`."
        )
    return None


def problems(environ: Mapping[str, str], dockerfile_text: str, locks: Path) -> list[str]:
    found = [
        check_extra_ca(environ.get("EXTRA_CA_CERT")),
        check_flavour(environ.get("CUDA_FLAVOUR"), dockerfile_text, locks),
    ]
    return [problem for problem in found if problem]


def main() -> int:
    found = problems(os.environ, dockerfile_facts.read(), Path("locks"))
    for problem in found:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
