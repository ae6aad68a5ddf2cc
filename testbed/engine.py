"""What the Docker engine grants a container, found out as `make up` finds it
(torchrig.host.preflight), once per process: every container the tests and benchmarks start asks
for no more than that, so they run where the engine cannot raise memlock (rootless Docker,
Podman's socket, a limited engine) as `make up` does there."""

from __future__ import annotations

import functools

from torchrig.host import preflight
from torchrig.host.workstations import run_docker

UNLIMITED = preflight.UNLIMITED


@functools.cache
def memlock(image: str) -> int:
    """The memlock limit, in bytes, to give a container of `image`: the engine's hard limit,
    or -1 (unlimited) where the engine grants that."""
    limit = preflight.engine_memlock_limit(run_docker, image)
    return UNLIMITED if limit is None else limit
