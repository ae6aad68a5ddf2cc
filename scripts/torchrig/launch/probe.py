"""The remote end of the preflight: one host's facts as one JSON line. torch is not imported
(versions come from the packages' metadata), so the probe is quick even where torch is broken.
The way to the rendezvous is each host's own launch's to check (plan.check_rendezvous), and a
taken rendezvous port torchrun's to report."""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import platform
import pwd
import sys
import time
from pathlib import Path
from typing import Any

from torchrig import __version__
from torchrig.launch import network


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def nccl_version() -> str | None:
    """The NCCL that torch's wheels bring (nvidia-nccl-cu12, -cu13, ...), if any."""
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith("nvidia-nccl"):
            return f"{name} {dist.version}"
    return None


def script_facts(cwd: str, script: str | None) -> dict[str, Any]:
    folder = Path(cwd)
    if not folder.is_dir():
        return {
            "script_error": f"no folder {cwd} here: the launch runs in the same folder on every "
            "host; put the code at the same path on each (or use a shared folder)"
        }
    if script is None:
        return {}
    path = folder / script
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        return {
            "script_error": f"cannot read {script} in {cwd} ({exc.strerror}): copy the code to "
            "every host at the same path (or use a shared folder)"
        }
    return {"script_sha256": digest}


def login_shell() -> str | None:
    """The shell sshd runs the commands in: this user's login shell (`-c COMMAND`)."""
    try:
        return pwd.getpwuid(os.getuid()).pw_shell or None
    except KeyError:
        return None


def facts(cwd: str, script: str | None) -> dict[str, Any]:
    """What the preflight compares across hosts (preflight.problems_of)."""
    return {
        "python": platform.python_version(),
        "torch": package_version("torch"),
        "nccl": nccl_version(),
        "torchrig": __version__,
        "public_addresses": network.public_addresses(),
        "login_shell": login_shell(),
        **script_facts(cwd, script),
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m torchrig.launch.probe")
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--script")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    result = facts(args.cwd, args.script)
    result["time"] = time.time()
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
