"""How torchrig starts a Python module of its own (or torch's) in a new interpreter.

`python -m module` puts the working directory first on `sys.path`: run in a folder someone else
can write (`/workspace`, for root in the container), it would import that folder's `torchrig/`
or `torch/` instead of the installed one. `-P` (Python 3.11+, the same as PYTHONSAFEPATH but for
this process alone) leaves it out. Only on the command line: set in the environment, it would
also reach the user's scripts that torchrun starts, which may import modules beside them.
"""

from __future__ import annotations


def module_command(python: str, module: str, *args: str) -> list[str]:
    """`python -P -m module args...`: the installed module, never one in the working directory."""
    return [python, "-P", "-m", module, *args]
