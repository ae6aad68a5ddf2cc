"""Markers named by the uid that ran the code: what the root-isolation tests plant leaves one
in /tmp when it runs, and a marker ending in -0 is code of dev's that root ran."""

from __future__ import annotations

from .stack import Stack

MARKER_PREFIX = "torchrig-ran-as-"


def marker_python(what: str) -> str:
    """Python that leaves /tmp/torchrig-ran-as-<what>-<uid> behind when it runs."""
    return f"import os; open(f'/tmp/{MARKER_PREFIX}{what}-{{os.getuid()}}', 'a').close()\n"


def marker_shell(what: str, then: str) -> str:
    """A stand-in program: leaves its marker, then runs the real one (all by absolute paths)."""
    return (
        f'#!/bin/sh\n/usr/bin/touch "/tmp/{MARKER_PREFIX}{what}-$(/usr/bin/id -u)"\n'
        f'exec {then} "$@"\n'
    )


def markers(stack: Stack) -> set[str]:
    """Every marker in the container's /tmp."""
    code, output = stack.exec("ls -1 /tmp")
    assert code == 0, output
    return {name for name in output.split() if name.startswith(MARKER_PREFIX)}


def ran_as_root(found: set[str]) -> set[str]:
    return {name for name in found if name.endswith("-0")}
