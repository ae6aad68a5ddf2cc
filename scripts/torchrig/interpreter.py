"""How torchrig starts a Python module of its own (or torch's) in a new interpreter.

`python -m` puts the working directory first on `sys.path`: in a folder someone else can write
(`/workspace`, for root) it would import that folder's `torchrig/` or `torch/`. `-P` leaves it
out, on the command line only: PYTHONSAFEPATH would also reach the user's scripts."""

from __future__ import annotations


def module_command(python: str, module: str, *args: str) -> list[str]:
    """`python -P -m module args...`: the installed module, never one in the working directory."""
    return [python, "-P", "-m", module, *args]
