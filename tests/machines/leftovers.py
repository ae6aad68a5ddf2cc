"""What a test run makes on the container engines (compose projects and their containers,
volumes and networks; plain containers, networks and volumes; image tags; the folders of test
checkouts, whose names become their workstations') is named with `name()`: this checkout's mark
and the id of the process that made it. `sweep` removes what such runs left, and nothing else:
never a workstation a person made with `make up` (`torchrig-<user>...`), never another checkout's
test run, never a run of this checkout that is still going.

Each test's teardown removes what it made; the sweep is for what no teardown could: a fixture
that failed half way, a second Ctrl-C, a killed run (the next run's start removes its things).
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import subprocess
from collections.abc import Callable

from testbed import REPO_ROOT

# Six hex digits of the checkout's path: two checkouts' test runs on one engine never share one.
MARK = "trt" + hashlib.sha256(os.path.realpath(REPO_ROOT).encode()).hexdigest()[:6]
MADE_BY = re.compile(rf"{MARK}p(\d+)-")
ENGINES = ("docker", "podman")
# An image a run builds under a name it cannot choose (a stand-in for a person's own image) is
# labelled with `name()` instead.
LABEL = "org.torchrig.test.made-by"
# Each kind: how to list it (one line each: what removes it first, then its name and labels) and
# how to remove it, in the order that frees each for the next: containers hold networks and
# volumes, and both hold image tags.
KINDS = (
    ("container", ("ps", "--all", "--no-trunc", "--format", "{{.ID}}\t{{.Names}}\t{{.Labels}}"),
     ("rm", "--force", "--volumes")),
    ("network", ("network", "ls", "--no-trunc", "--format", "{{.ID}}\t{{.Name}}\t{{.Labels}}"),
     ("network", "rm")),
    ("volume", ("volume", "ls", "--format", "{{.Name}}\t{{.Labels}}"), ("volume", "rm", "--force")),
    ("image", ("images", "--format", "{{.Repository}}:{{.Tag}}"), ("rmi",)),
)  # fmt: skip
TIMEOUT_S = 120


def name() -> str:
    """A fresh name for something this process makes: `trt<mark>p<pid>-<4 hex>`, lowercase
    letters, digits and '-' (what compose project, container and image names all allow), short
    enough to be a checkout folder's whole part of its workstation's name (host.project)."""
    return f"{MARK}p{os.getpid()}-{secrets.token_hex(2)}"


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process, alive
    return True


def made_by(line: str) -> int | None:
    """The process of this checkout's runs that made what a listed line names, if one did."""
    found = MADE_BY.search(line)
    return int(found[1]) if found else None


def is_left(line: str, own_pid: int | None, alive: Callable[[int], bool] = is_alive) -> bool:
    """Whether a run of this checkout made it and left it: its process is gone, or is `own_pid`
    (the run that is ending)."""
    pid = made_by(line)
    return pid is not None and (pid == own_pid or not alive(pid))


def engine(program: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [program, *args], capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )


def labelled_images(program: str) -> list[str]:
    """One line per image with LABEL: its tags, then the label (what `made_by` reads)."""
    ids = engine(program, "images", "--quiet", "--filter", f"label={LABEL}").stdout.split()
    if not ids:
        return []
    tags_and_label = f'{{{{join .RepoTags " "}}}}\t{{{{index .Config.Labels "{LABEL}"}}}}'
    inspected = engine(program, "image", "inspect", "--format", tags_and_label, *set(ids))
    return inspected.stdout.splitlines() if inspected.returncode == 0 else []


def listed(program: str) -> list[tuple[str, tuple[str, ...], str]]:
    """Everything on one engine, in the order to remove it: (kind, how to remove it, its line,
    whose first field names it; several tags for an image)."""
    rows = []
    for kind, listing, removal in KINDS:
        done = engine(program, *listing)
        if done.returncode == 0:
            rows += [(kind, removal, line) for line in done.stdout.splitlines()]
    return rows + [("image", ("rmi",), line) for line in labelled_images(program)]


def sweep(own_pid: int | None = None) -> list[str]:
    """Remove what runs of this checkout left on every engine here (Docker's, Podman's): what
    gone processes made, and what `own_pid` made (a run's end). What it removed, named."""
    removed = []
    for program in filter(shutil.which, ENGINES):
        for kind, removal, line in listed(program):
            if not is_left(line, own_pid):
                continue
            for what in line.split("\t")[0].split():
                if engine(program, *removal, what).returncode == 0:
                    removed.append(f"{program} {kind} {what}")
    return removed
