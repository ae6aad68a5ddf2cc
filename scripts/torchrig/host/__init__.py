"""The Makefile's helpers, run on the user's machine before and around Docker.

`make` runs them with plain `python3 -m torchrig.host.<module>` and `PYTHONPATH=scripts`, with no
venv, so they import only the standard library and the top-level modules both sides of Docker
share (`user_ids`, `ownership`, `mounts`, `voice`), never `torchrig.container` (that package runs
inside the image). docs/architecture.md lists what each module does.
"""
