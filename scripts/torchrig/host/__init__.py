"""The Makefile's helpers, run on the user's machine before and around Docker.

`make` runs them with plain `python3 -m torchrig.host.<module>` and `PYTHONPATH=scripts`, with no
venv, so they import only the standard library and `torchrig.user_ids` (PUID/PGID, parsed as
the container parses them), never `torchrig.container` (that package runs inside the image).

`dotenv` writes `.env` on the first `make up`; `bind_mounts` creates the bind-mount sources
before Docker does it as root; `up` starts the container, waits until it is ready and prints
how to connect or why it failed; `buildcheck` checks `make build`'s inputs; `lockfile` is
`make lock`; `dockerfile_facts` reads the CUDA flavours from the Dockerfile.
"""
