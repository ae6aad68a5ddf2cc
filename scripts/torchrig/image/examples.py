"""The workspace's copy of the examples (the training example and its notebook).

The image keeps the checkout's `examples/` root-owned and read-only in /opt/torchrig/examples; the
start copies it, as dev, to /workspace/examples when the workspace has none (its first start), so
`torchrun ... /workspace/examples/train_ddp.py` runs and the copy is dev's to edit. Nothing reads
that copy back: the host runs the checkout's `examples/`, and the image is built from there.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from torchrig.image.settings import VOICE
from torchrig.shared import mounts

IN_IMAGE = Path("/opt/torchrig/examples")
IN_WORKSPACE = Path(mounts.WORKSPACE.point, "examples")


def copy_to_workspace(source: Path = IN_IMAGE, target: Path = IN_WORKSPACE) -> None:
    """As dev: the image's examples to the workspace, unless it has its own (or anything of that
    name) or dev cannot write there (a read-only image under Apptainer)."""
    if os.path.lexists(target) or not os.access(target.parent, os.W_OK | os.X_OK):
        return
    try:
        shutil.copytree(source, target)
    except OSError as exc:
        VOICE.warning(f"the examples were not copied to {target} ({exc}): they are in {source}")
        return
    VOICE.note(f"copied the examples to {target}: yours to edit (the image keeps its own)")
