"""The settings `make up` reads, checked by name before anything starts: a variable of ours
misspelled (`JUPYTER_PROT=9999`, a lowercase `jupyter_port` in .env) is an error that says which
one was meant, instead of a start on the default.

The names torchrig knows are read from where they are defined: the compose files (`${NAME...}`
and the bare names passed through), the Makefile's own variables, and the few the host helpers
read themselves. `.env` and the make command line hold only settings, so every name there must be
one of those. The environment holds everything else a user has: no name there is guessed at.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from torchrig.host import dotenv, gpus
from torchrig.shared.voice import CannotGoOn

# compose's own variables, and Docker's and BuildKit's, which compose and the CLI read.
FOREIGN_PREFIXES = ("COMPOSE_", "DOCKER_", "BUILDKIT_")
COMPOSE_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")
# `- PUID` in an `environment:` or build `args:` list: passed through when set.
COMPOSE_BARE_ITEM = re.compile(r"^\s*-\s+([A-Z_][A-Z0-9_]*)\s*(?:#.*)?$", re.MULTILINE)
MAKE_REFERENCE = re.compile(r"\$\(([A-Z_][A-Z0-9_]*)\)")
MAKE_DEFAULT = re.compile(r"^([A-Z_][A-Z0-9_]*)\s*\?=", re.MULTILINE)
# Read by the host helpers themselves (torchrig.host.gpus), not by compose.
HOST_VARIABLES = (gpus.SHARE_VARIABLE,)
DID_YOU_MEAN_CUTOFF = 0.75
WHERE_LISTED = "docs/workstation.md lists every setting"


def compose_files(folder: Path) -> list[Path]:
    """The project's compose files: docker-compose.yml and its overrides (CPU, published)."""
    return sorted(folder.glob("docker-compose*.yml"))


def names_in_compose(text: str) -> set[str]:
    return set(COMPOSE_REFERENCE.findall(text)) | set(COMPOSE_BARE_ITEM.findall(text))


def names_in_makefile(text: str) -> set[str]:
    return set(MAKE_REFERENCE.findall(text)) | set(MAKE_DEFAULT.findall(text))


def without_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def known_names(folder: Path, extra_files: Iterable[Path] = ()) -> set[str]:
    """Every variable make up, compose or the image's build reads, from the files defining them."""
    known = set(HOST_VARIABLES)
    for path in [*compose_files(folder), *extra_files]:
        known |= names_in_compose(without_comments(path.read_text(encoding="utf-8")))
    makefile = folder / "Makefile"
    if makefile.is_file():
        known |= names_in_makefile(without_comments(makefile.read_text(encoding="utf-8")))
    return known


def is_known(name: str, known: set[str]) -> bool:
    return name in known or name.startswith(FOREIGN_PREFIXES)


def meant(name: str, known: set[str]) -> str | None:
    """The known name `name` was likely meant as: the same in upper case, else the closest."""
    if name.upper() in known:
        return name.upper()
    close = difflib.get_close_matches(name.upper(), sorted(known), n=1, cutoff=DID_YOU_MEAN_CUTOFF)
    return close[0] if close else None


def command_line_names(makeflags: str) -> list[str]:
    """The variables set on make's command line, from MAKEFLAGS (`s -- NAME=value ...`)."""
    _, separator, assignments = makeflags.partition("-- ")
    if not separator:
        return []
    words = re.split(r"(?<!\\) ", assignments)
    found = (re.match(r"([^=:\s]+)\s*:{0,2}=", word) for word in words)
    return [match[1] for match in found if match]


def strict_problem(name: str, where: str, known: set[str]) -> str | None:
    if is_known(name, known):
        return None
    guess = meant(name, known)
    hint = f": did you mean {guess}?" if guess else f" ({WHERE_LISTED})"
    return f"{where}: {name} is not a setting of torchrig{hint}"


def problems(
    known: set[str], makeflags: str, env_file_values: Mapping[Path, Mapping[str, str]]
) -> list[str]:
    """One line per misspelled or unknown setting, on make's command line or in an env file."""
    found: list[str | None] = [
        strict_problem(name, "the make command line", known)
        for name in command_line_names(makeflags)
    ]
    for file, values in env_file_values.items():
        found += [strict_problem(name, str(file), known) for name in values]
    return [line for line in dict.fromkeys(found) if line]


def files_of(compose_command: Iterable[str]) -> list[Path]:
    """The files a compose command names with `-f`."""
    command = list(compose_command)
    return [Path(command[i + 1]) for i, arg in enumerate(command[:-1]) if arg in ("-f", "--file")]


def check_names(folder: Path, env_file: Path, compose_command: Iterable[str] = ()) -> None:
    """CannotGoOn naming every setting that is not one of ours, before anything is touched."""
    known = known_names(folder, [folder / path for path in files_of(compose_command)])
    found = problems(known, os.environ.get("MAKEFLAGS", ""), dotenv.values_by_file(env_file))
    if found:
        said = "\n".join(f"  {line}" for line in found)
        raise CannotGoOn(
            f"settings torchrig does not know, so nothing was started or changed:\n{said}",
            f"  Correct or remove them ({WHERE_LISTED}), then `make up` again.",
        )
