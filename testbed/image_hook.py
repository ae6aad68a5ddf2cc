"""The image's `.pth` hook (entrypoint/torchrig-rank-exit.pth) in every interpreter started
outside the image: the file in a folder that a `sitecustomize` makes a site folder, which `site`
reads at each start as it reads the image's site-packages. For the tests and benchmarks of users'
own code run on this machine."""

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
