"""The image's `.pth` hook (entrypoint/torchrig-rank-exit.pth) in interpreters started outside the
image: written to a folder that a `sitecustomize` makes a site folder.
"""

import os
import tempfile
from functools import cache
from pathlib import Path

from testbed import REPO_ROOT

HOOK = REPO_ROOT / "entrypoint" / "torchrig-rank-exit.pth"


def with_image_hook(environ: dict[str, str], folder: Path | None = None) -> dict[str, str]:
    """`environ` with `folder` (one per process when not given) first on its PYTHONPATH: the hook
    and the sitecustomize.py that reads it are written there."""
    hook = str(write_hook(folder) if folder else hook_folder())
    return {
        **environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [hook, environ.get("PYTHONPATH")])),
    }


@cache
def hook_folder() -> Path:
    """One folder per process: the hook is the same for every run."""
    return write_hook(Path(tempfile.mkdtemp(prefix="torchrig-hook-")))


def write_hook(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / HOOK.name).write_text(HOOK.read_text())
    (folder / "sitecustomize.py").write_text(f"import site\nsite.addsitedir({str(folder)!r})\n")
    return folder
