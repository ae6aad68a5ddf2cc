"""The Makefile's helpers, run on the user's machine before and around Docker.

`make` runs them with plain `python3 -m torchrig.host.<module>` and `PYTHONPATH=scripts`, with no
venv, so they import only the standard library and the top-level modules both sides of Docker
share (`user_ids`: PUID/PGID, parsed as the container parses them; `ownership`; `mounts`; `voice`),
never `torchrig.container` (that package runs inside the image).

`up` starts the container (GPUs or CPU mode, `gpu_mode`), waits until its services answer and
prints how to connect or why it failed (`compose_failure` for compose's own failures);
`prepare` is what it does first: `dotenv` writes `.env` on the first `make up`, `bind_mounts`
creates the bind-mount sources before Docker does it as root; `buildcheck` checks `make build`'s
inputs; `lockfile` is `make lock`; `dockerfile_facts` reads the CUDA flavours from the Dockerfile.
"""
