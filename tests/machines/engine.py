"""What the Docker engine grants a container, found out as `make up` finds it
(torchrig.host.memlock), once per process: every container the tests and benchmarks start asks
for no more than that, so they run where the engine cannot raise memlock (rootless Docker,
Podman's socket, a limited engine) as `make up` does there."""

from __future__ import annotations

import functools

from torchrig.host import memlock as host_memlock

UNLIMITED = host_memlock.UNLIMITED


@functools.cache
def memlock() -> int:
    """The memlock limit, in bytes, to give a container: the engine's hard limit, or -1
    (unlimited) where the engine grants that."""
    limit = host_memlock.engine_memlock_limit()
    if limit is None:
        raise RuntimeError("the Docker engine could not be asked what memlock it grants")
    return limit
