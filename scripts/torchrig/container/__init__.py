"""The container's start-up, run inside the image at every start (standard library only, and
nothing slow; never `torchrig.host`, which is the Makefile's side on the user's machine).

`entrypoint` (the whole start sequence), `settings` (the one reader of the environment's
variables), `banner` (versions and checks), `accounts` (UID/GID remap, privilege drop), `ssh`,
`jupyter`, `supervisor`, `state`, `log`; and for a running container `healthcheck` (Docker's
HEALTHCHECK), `jupyter_url` (`make jupyter-url`), `endpoints` (what `make up` prints) and
`readiness` (what `make up` waits on, and what the container says it is doing meanwhile).
`root_main` is how root runs all this: a root-owned copy, `python3 -I -S`, never the venv.
"""
