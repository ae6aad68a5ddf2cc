"""The checkout's committed `workspace/`, for what the host runs (`make gpu-report`, `make test`).

The container's dev writes `./workspace` (it is mounted read-write): the host never runs a file
from there. Host-side code runs the copy git holds instead (the index: what `git add` staged),
written into a private temp folder once per process; when the working copy differs, one line
says so. The example in `./workspace` stays the user's, to edit and run in the container.
Standard library only.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
FOLDER = "workspace"
REGULAR_MODES = {"100644": 0o644, "100755": 0o755}  # git's modes for files (not symlinks)


def committed_workspace(root: Path = REPO_ROOT) -> Path:
    """A private copy of `root`'s committed workspace/ (its `workspace` folder), made once."""
    return private_copy(root.resolve())


@functools.cache
def private_copy(root: Path) -> Path:
    if not (root / ".git").exists():
        # A copy without git's history (a release archive, a tree copied to a GPU machine that
        # runs no container): no committed copy to prefer, so the folder as it is, said once.
        print(
            f"note: {root} is not a git checkout: running {FOLDER}/ as it is (keep it out of "
            "reach of a container's dev)",
            file=sys.stderr,
        )
        return root / FOLDER
    private = Path(tempfile.mkdtemp(prefix="torchrig-committed-"))  # 0700: this user's alone
    atexit.register(shutil.rmtree, private, ignore_errors=True)
    changed = []
    for mode, blob, name in index_entries(root):
        if mode not in REGULAR_MODES:
            continue
        data = git(root, "cat-file", "blob", blob)  # raw: no filter of the checkout runs
        copy = private / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(data)
        copy.chmod(REGULAR_MODES[mode])
        if differs(root / name, data):
            changed.append(name)
    if changed:
        print(
            f"note: ran git's copy of {FOLDER}/, not your edits to {', '.join(changed)} (the "
            "container writes that folder, so the host never runs it; `git add` an edit to run it)",
            file=sys.stderr,
        )
    return private / FOLDER


def example(root: Path = REPO_ROOT) -> str:
    """The training example's committed copy, for host-side code to run."""
    return str(committed_workspace(root) / "examples" / "train_ddp.py")


def index_entries(root: Path) -> list[tuple[str, str, str]]:
    """(mode, blob, path) of each file of workspace/ in git's index."""
    listed = git(root, "ls-files", "-z", "--stage", "--", FOLDER).decode()
    entries = []
    for line in filter(None, listed.split("\0")):
        info, name = line.split("\t", 1)
        mode, blob, _stage = info.split()
        entries.append((mode, blob, name))
    return entries


def differs(path: Path, data: bytes) -> bool:
    try:
        return path.read_bytes() != data
    except OSError:
        return True


def git(root: Path, *args: str) -> bytes:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"`git {' '.join(args)}` failed in {root}: {done.stderr.decode().strip()} (the "
            f"host runs {FOLDER}/ only from git's copy, never the folder the container writes)"
        )
    return done.stdout
