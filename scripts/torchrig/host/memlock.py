"""The memlock limit this Docker engine grants a container, learned before compose builds or makes
anything. `make up` asks for unlimited (compose's default MEMLOCK=-1), which an engine without the
right to raise limits (rootless Docker, Podman, a nested engine) refuses, and compose would say so
only after the build and after the network, volumes and container were made. So, as it picks
free ports: MEMLOCK unset and unlimited refused, it writes the most the engine grants to `.env`,
with a note; a MEMLOCK the user set that the engine cannot grant is refused, with the value that
works. A workstation that was started with the same value already is not asked about again.

How the engine is asked (`granted`; the container tests ask it too): a throwaway
container of an empty image (imported from an empty archive, so nothing is built or pulled, and
removed after) is started with the limit. The engine sets the limit before it would run the
container's program, and there is none: "no such file" (exit 127) means it granted it, "error
setting rlimit type 8" that it refused. The most it grants is unlimited, or else the largest power
of two of bytes, found by bisection with the common limit (8 MiB) tried first.
"""

from __future__ import annotations

import os
import re
import tarfile
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from torchrig.host import dotenv
from torchrig.host.workstations import Docker, run_docker
from torchrig.shared.voice import MAKEFILE as VOICE
from torchrig.shared.voice import CannotGoOn

VARIABLE = "MEMLOCK"
UNLIMITED = -1
# The powers of two of bytes tried: 1 KiB to 16 TiB, 8 MiB first (systemd's default since v253,
# and this project's CI engine's), then the next one up (a limit is mostly a power of two).
LOWEST, HIGHEST, FIRST = 10, 44, 23
# docker run's exit status when the container's program cannot be found: the engine had set the
# limit by then. A program that cannot be: the empty image has no file at all.
NOT_FOUND = 127
NO_PROGRAM = "/torchrig-memlock-probe"
NEVER_STARTED = "0001-01-01"  # Docker's StartedAt of a container that was only created
# runc, when the engine may not raise a ulimit this high (RLIMIT_MEMLOCK is type 8).
REFUSED = re.compile(r"error setting rlimit type 8\b")
MIB = 1024 * 1024


def limits(value: Any) -> tuple[int, int] | None:
    """compose's `memlock: N` or `{soft: N, hard: N}` as (soft, hard)."""
    if isinstance(value, dict):
        return int(value.get("soft", UNLIMITED)), int(value.get("hard", UNLIMITED))
    return None if value is None else (int(value), int(value))


def memlock_of(inspected: Mapping[str, Any]) -> tuple[int, int] | None:
    """The memlock a container was made with, from its `docker inspect`."""
    ulimits = (inspected.get("HostConfig") or {}).get("Ulimits") or []
    had = [(int(u["Soft"]), int(u["Hard"])) for u in ulimits if u.get("Name") == "memlock"]
    return had[0] if had else None


def started_with(inspected: Mapping[str, Any] | None, wanted: tuple[int, int]) -> bool:
    """Whether this workstation's container was started with `wanted`: the engine granted it."""
    if not inspected or memlock_of(inspected) != wanted:
        return False
    started = str((inspected.get("State") or {}).get("StartedAt") or NEVER_STARTED)
    return not started.startswith(NEVER_STARTED)


def empty_image(docker: Docker) -> str | None:
    """An image with no file in it, imported from an empty archive; its id, None on failure."""
    with tempfile.TemporaryDirectory(prefix="torchrig-memlock-") as folder:
        archive = Path(folder) / "empty.tar"
        with tarfile.open(archive, "w"):
            pass
        imported = docker("import", str(archive))
    said = imported.stdout.strip()
    return said if imported.returncode == 0 and said else None


def grants(docker: Docker, image: str, limit: int) -> bool | None:
    """Whether the engine grants a container `limit` bytes of memlock (-1: unlimited); None when
    the throwaway container failed otherwise."""
    tried = docker(
        "run", "--rm", "--network", "none", "--pull", "never", "--log-driver", "none",
        "--ulimit", f"memlock={limit}:{limit}", "--entrypoint", NO_PROGRAM, image,
    )  # fmt: skip
    if tried.returncode == NOT_FOUND:
        return True
    if REFUSED.search(tried.stderr):
        return False
    return None


def most_granted(grants_bytes: Callable[[int], bool | None]) -> int | None:
    """The largest power of two of bytes that `grants_bytes` (0 below 1 KiB); None when an
    answer was neither."""
    low, high = LOWEST - 1, HIGHEST + 1  # granted at 2**low (or below the range), not at 2**high
    first_tries = [FIRST, FIRST + 1]
    while high - low > 1:
        tried = next((n for n in first_tries if low < n < high), (low + high) // 2)
        answer = grants_bytes(2**tried)
        if answer is None:
            return None
        low, high = (tried, high) if answer else (low, tried)
    return 2**low if low >= LOWEST else 0


@contextmanager
def throwaway_image(docker: Docker) -> Iterator[str | None]:
    """The empty image for the block, removed after it (its containers are `--rm`)."""
    image = empty_image(docker)
    try:
        yield image
    finally:
        if image is not None:
            docker("image", "rm", image)


def granted(docker: Docker, wanted: int) -> int | None:
    """`wanted` (bytes; -1: unlimited) when the engine grants it, else the most it grants, the
    largest power of two; None when it could not be asked."""
    with throwaway_image(docker) as image:
        answer = None if image is None else grants(docker, image, wanted)
        if answer is not False:
            return None if answer is None else wanted
        return most_granted(lambda limit: grants(docker, image, limit))


def engine_memlock_limit(docker: Docker = run_docker) -> int | None:
    """The most memlock this engine grants a container (-1: unlimited); None: not known."""
    return granted(docker, UNLIMITED)


def memlock_text(limit: int) -> str:
    if limit < 0:
        return "unlimited"
    return f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit} bytes"


def refused_lines(wanted: int, limit: int) -> list[str]:
    """The engine may not raise memlock to `wanted` (rootless Docker, Podman, a limited engine):
    the value that works is the most it grants, `limit`."""
    return [
        f"the Docker engine may not raise the container's memlock limit to "
        f"{memlock_text(wanted)} (MEMLOCK={wanted}) (error setting rlimit type 8: operation not "
        f"permitted): it grants {memlock_text(limit)}. Nothing was built or started.",
        f"  Set MEMLOCK={limit} in .env (or `make up MEMLOCK={limit}`), or unset MEMLOCK: "
        "`make up` then writes the value itself. NCCL runs with it; pinned-memory transfers may "
        "be slower.",
    ]


def settle(
    docker: Docker,
    service: Mapping[str, Any],
    inspected: Mapping[str, Any] | None,
    env_file: Path,
) -> None:
    """Before compose builds or makes anything (`service`: compose's config of the workstation,
    `inspected`: its container, if any). CannotGoOn for a MEMLOCK set that the engine cannot
    grant; unset and unlimited refused, the most it grants is written to `env_file`."""
    wanted = limits((service.get("ulimits") or {}).get("memlock"))
    if wanted is None or started_with(inspected, wanted):
        return
    limit = granted(docker, wanted[1])
    if limit is None or limit == wanted[1]:
        return  # granted, or the engine could not be asked (compose will say why)
    if dotenv.setting(VARIABLE, env_file) is not None:
        raise CannotGoOn(*refused_lines(wanted[1], limit))
    os.environ[VARIABLE] = str(limit)  # this run's compose, over what it reads
    text = memlock_text(limit)
    comment = f"the most memlock this Docker engine grants ({text}): it refuses unlimited"
    written = dotenv.set_value(env_file, VARIABLE, str(limit), comment=comment)
    where = (
        f"wrote {VARIABLE}={limit} to {env_file}"
        if written
        else (f"add {VARIABLE}={limit} to your env file to keep it")
    )
    VOICE.note(
        f"this Docker engine grants no unlimited memlock: it grants {text}, so {where} (NCCL runs "
        "with it; pinned-memory transfers may be slower)"
    )
