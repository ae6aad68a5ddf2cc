"""What a torchrun job's agent looks like on a process table: `torchrun` (run as a script, or by
its interpreter), or `python -m torch.distributed.run` (what `torchrig launch` starts). Both sides
of Docker ask here: `torchrig status` in the container, for the jobs it shows, and `make up` on
the host, for the jobs a recreate would stop. Standard library only."""

from __future__ import annotations

from pathlib import PurePath

AGENT_MODULES = ("torch.distributed.run", "torch.distributed.launch")
INTERPRETER_OPTIONS_WITH_VALUE = ("-X", "-W")


def is_agent(argv: tuple[str, ...]) -> bool:
    """torchrun itself (run as a script, or by its interpreter), or python -m torch.distributed.*"""
    if PurePath(argv[0]).name == "torchrun":
        return True
    if not PurePath(argv[0]).name.startswith("python"):
        return False
    args = iter(argv[1:])
    for arg in args:
        if arg == "-m":
            return next(args, None) in AGENT_MODULES
        if arg.startswith("-m"):
            return arg[2:] in AGENT_MODULES
        if arg in INTERPRETER_OPTIONS_WITH_VALUE:
            next(args, None)
        elif not arg.startswith("-"):  # the script: the interpreter's options end here
            return PurePath(arg).name == "torchrun"
    return False
