"""Where the running container keeps its small state: the Jupyter token, the services list,
the exported environment. /run/torchrig normally; a per-user temp dir when the container was
started with `--user` and /run/torchrig is not ours."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

STATE_DIR = Path("/run/torchrig")
TOKEN_FILE = "jupyter-token"
SERVICES_FILE = "services"
ENVIRONMENT_FILE = "environment.sh"


def state_dir(preferred: Path = STATE_DIR) -> Path:
    if os.access(preferred, os.W_OK | os.X_OK):
        return preferred
    fallback = Path(tempfile.gettempdir()) / f"torchrig-{os.getuid()}"
    fallback.mkdir(mode=0o700, exist_ok=True)
    return fallback


def readable_state_dir(preferred: Path = STATE_DIR) -> Path:
    """For readers (healthcheck, jupyter-url): the dir that holds the services file."""
    if (preferred / SERVICES_FILE).exists() or (preferred / TOKEN_FILE).exists():
        return preferred
    for candidate in sorted(Path(tempfile.gettempdir()).glob("torchrig-*")):
        if (candidate / SERVICES_FILE).exists():
            return candidate
    return preferred
