"""The container's start-up and the host-side helpers around it.

In the container (runs at every start, so standard library only and nothing slow):
`entrypoint` (the whole start sequence), `banner` (versions and checks), `accounts` (UID/GID
remap, privilege drop), `ssh`, `jupyter`, `supervisor`, `healthcheck`, `jupyter_url`.
On the host, run by the Makefile with plain `python3` (also standard library only): `dotenv`
(writes `.env` on the first `make up`), `host_dirs` (creates bind-mount sources before Docker
does it as root), `buildcheck` (checks build inputs), `lockfile` (`make lock`).
"""
