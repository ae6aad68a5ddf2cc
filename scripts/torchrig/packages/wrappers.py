"""`pip` and `uv` as dev runs them in the kept venv: the real tool, and for uv the image's records
while it runs (uv sees only the target's own site-packages, astral-sh/uv#2500; docs/architecture.md
says why).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from torchrig.shared import kept, places, stack
from torchrig.shared.voice import IN_OTHERS_OUTPUT, Voice

# Inside pip's and uv's output.
VOICE = Voice(IN_OTHERS_OUTPUT)

# The real uv, off every PATH: dev reaches it through this wrapper only.
UV = "/opt/uv/bin/uv"
# `uv pip` commands that read or change the environment's installed set.
UV_READS_ENVIRONMENT = frozenset({"install", "sync", "list", "freeze", "show", "tree", "check"})
# Options that point uv at another environment than VIRTUAL_ENV.
UV_OTHER_TARGET = ("--python", "-p", "--system", "--target", "-t", "--prefix")


def uv_pip_command(args: Sequence[str]) -> str | None:
    """The `uv pip` subcommand of an argument list ('install'), or None for any other uv use."""
    words = [arg for arg in args if not arg.startswith("-")]
    if len(words) >= 2 and words[0] == "pip":
        return words[1]
    return None


def uv_needs_image_records(args: Sequence[str], environ: Mapping[str, str], prefix: Path) -> bool:
    """True when uv is about to resolve against, or list, the kept venv."""
    if uv_pip_command(args) not in UV_READS_ENVIRONMENT:
        return False
    if any(arg.split("=", 1)[0] in UV_OTHER_TARGET for arg in args):
        return False
    target = environ.get("VIRTUAL_ENV", "")
    return bool(target) and os.path.realpath(target) == os.path.realpath(prefix)


@contextlib.contextmanager
def image_records(site: Path, image: Path) -> Iterator[None]:
    """A record of each image distribution the kept venv lacks, while the block runs."""
    present = {stack.normalize(d.name) for d in kept.kept_dists(site)}
    for dist in importlib.metadata.distributions(path=[str(image)]):
        name, version = dist.metadata["Name"], dist.version
        if not name or stack.normalize(name) in present:
            continue
        present.add(stack.normalize(name))
        # A dist-info folder name as wheels spell it: nvidia_nccl_cu13-2.29.7.dist-info
        folder = site / f"{stack.normalize(name).replace('-', '_')}-{version}.dist-info"
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        (folder / "METADATA").write_text(dist.read_text("METADATA") or "", encoding="utf-8")
        (folder / "INSTALLER").write_text(kept.IMAGE_RECORD_INSTALLER + "\n", encoding="utf-8")
        files = ("METADATA", "INSTALLER", "RECORD")
        record = "".join(f"{folder.name}/{file},,\n" for file in files)
        (folder / "RECORD").write_text(record, encoding="utf-8")
    try:
        yield
    finally:
        kept.remove_image_records(site)


def run(command: Sequence[str]) -> int:
    """Run the tool; its status. A Ctrl-C reaches it too: it ends its own way, waited for."""
    process = subprocess.Popen(list(command))
    while True:
        try:
            return process.wait()
        except KeyboardInterrupt:
            continue


def main(
    tool: str,
    args: Sequence[str],
    environ: Mapping[str, str] = os.environ,
) -> int:
    prefix = Path(sys.prefix)
    command = [UV, *args] if tool == "uv" else [sys.executable, "-m", "pip", *args]
    if tool == "uv" and not os.access(UV, os.X_OK):
        VOICE.error(f"uv is not in this image ({UV})")
        return 127
    image = Path(places.site_packages(places.IMAGE_PREFIX))
    records = tool == "uv" and uv_needs_image_records(args, environ, prefix)
    with image_records(kept.kept_site(prefix), image) if records else contextlib.nullcontext():
        return run(command)
