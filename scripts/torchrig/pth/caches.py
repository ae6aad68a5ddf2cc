"""Where the running user's caches go: torch.compile's (inductor), Triton's and Hugging Face's.

A compile cache holds code that is imported and pickles that are loaded, so whoever can write it
runs code as whoever reads it: root must never read dev's, and under Apptainer or pyxis the caches
must be the user's own. So the image's environment names no cache folder; a root-owned `.pth`
hook calls `follow_user` at every interpreter start instead, putting them under the user's cache
home (never torch's default `/tmp/torchinductor_<user>`, which another user can make first).
Imported at every interpreter start: `os` alone."""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

# Each cache's variable and its folder inside the cache home.
CACHE_FOLDERS = {
    "TORCHINDUCTOR_CACHE_DIR": "torchinductor",
    "TRITON_CACHE_DIR": "triton",
    "HF_HOME": "huggingface",
}


def cache_home(environ: Mapping[str, str]) -> str | None:
    """The user's cache home by the XDG rule, or None without an absolute HOME (`/` is none:
    Docker's HOME for a uid with no passwd entry)."""
    xdg = environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return xdg
    home = environ.get("HOME", "")
    if not os.path.isabs(home) or os.path.normpath(home) == "/":
        return None
    return os.path.join(home, ".cache")


def writable_here(path: str) -> bool:
    """True when path, or the nearest folder above it that exists, is writable by this user."""
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent
    return os.access(path, os.W_OK | os.X_OK)


def cache_environment(home: str) -> dict[str, str]:
    """Every cache variable, each in its folder under the cache home `home`."""
    return {name: os.path.join(home, folder) for name, folder in CACHE_FOLDERS.items()}


def user_cache_environment(environ: Mapping[str, str], euid: int | None = None) -> dict[str, str]:
    """The cache variables the user did not set, in the user's own cache home. None of them
    when there is no home to write to: the libraries' own defaults then apply, and `torchrig
    verify` and the container's start say what is wrong with HOME. Root keeps its home's even
    then: torch's default for root is a folder in the shared /tmp, which another user could
    have made first and filled; a compile that fails is better than one that runs their code."""
    home = cache_home(environ)
    as_root = (os.geteuid() if euid is None else euid) == 0
    if home is None or (not as_root and not writable_here(home)):
        return {}
    return {name: value for name, value in cache_environment(home).items() if name not in environ}


def home_problem(environ: Mapping[str, str], uid: int) -> str | None:
    """Why this user's caches and `pip install --user` cannot go to their home, or None."""
    home = environ.get("HOME", "")
    if not os.path.isabs(home) or os.path.normpath(home) == "/":
        where = f"HOME={home!r}" if home else "HOME is not set"
        lost = "`pip install --user` fails"
        if cache_home(environ) is None:
            lost = "the compile caches go to /tmp and " + lost
        return (
            f"{where}: uid {uid} has no home to write to, so {lost}; give it one (Apptainer "
            "binds yours: --home DIR; Docker: -e HOME=DIR with DIR mounted writable)"
        )
    cache = cache_home(environ)
    if cache is not None and not writable_here(cache):
        return (
            f"{cache} is not writable for uid {uid}: the compile caches go to /tmp; set HOME "
            "(or XDG_CACHE_HOME) to a folder you can write"
        )
    if not writable_here(home):
        return (
            f"HOME={home} is not writable for uid {uid}: `pip install --user` fails; set HOME "
            "to a folder you can write"
        )
    return None


def follow_user(environ: MutableMapping[str, str] = os.environ) -> None:
    """The `.pth` hook: fill in the cache variables the user did not set, from their home."""
    environ.update(user_cache_environment(environ))
