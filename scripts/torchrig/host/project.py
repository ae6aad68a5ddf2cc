"""Every checkout is its own workstation: its compose project name belongs to the checkout
(`python3 -m torchrig.host.project -- docker compose ...` for make down and make build).

How the name is chosen, kept from before, and guarded: docs/sharing.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pwd
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from torchrig.host import dotenv
from torchrig.host.workstations import (
    PROJECT_LABEL,
    Compose,
    Docker,
    inspect_labelled,
    parse,
    run_docker,
)
from torchrig.shared.voice import MAKEFILE as VOICE
from torchrig.shared.voice import CannotGoOn, harmless

VARIABLE = "COMPOSE_PROJECT_NAME"
PREFIX = "torchrig"
# compose's rule for a project name.
VALID = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
MAX_PART = 24  # user and folder each, so the name stays readable in `docker ps`
HASH_CHARS = 6
HOW_TO_CHOOSE = (
    f"  Choose another name for this folder's workstation: set {VARIABLE}=<name> in .env (or "
    f"`make up {VARIABLE}=<name>`); lowercase letters, digits, '-' and '_'."
)


def slug(text: str) -> str:
    """`Alice.Smith` -> `alice-smith`: what compose allows, dashes for the rest."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:MAX_PART].strip("-")


def readable_name(user: str, folder: Path) -> str:
    """`torchrig-<user>-<folder>`; the folder left out when it is `torchrig` itself."""
    # A user name of no letter or digit at all must not leave the old shared name, `torchrig`.
    parts = [PREFIX, slug(user) or f"uid{os.getuid()}", slug(folder.name)]
    if parts[2] in ("", PREFIX):
        parts.pop()
    return "-".join(part for part in parts if part)


def with_hash(name: str, folder: Path) -> str:
    digest = hashlib.sha256(os.path.realpath(folder).encode()).hexdigest()[:HASH_CHARS]
    return f"{name}-{digest}"


def check_name(name: str) -> None:
    if not VALID.match(name):
        raise CannotGoOn(
            f"{VARIABLE}={name!r} is not a name compose accepts: lowercase letters, digits, '-' "
            "and '_', starting with a letter or digit.",
            HOW_TO_CHOOSE,
        )


def user_name(uid: int | None = None, unknown: str = "uid{}") -> str:
    """The user name of `uid` (this process's by default), else `unknown` with the uid."""
    uid = os.getuid() if uid is None else uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return unknown.format(uid)


def folder_owner(folder: str) -> str:
    """Who owns a folder on this machine (user name, else uid), or '' when it is not here."""
    try:
        return user_name(os.stat(folder).st_uid, "uid {}")
    except OSError:
        return ""


def same_folder(one: str, other: Path) -> bool:
    return os.path.realpath(one) == os.path.realpath(other)


def new_name(folder: Path) -> str:
    """The readable name with the folder's hash: another folder's never has it, so no engine is
    asked (two clones into folders of one name are two names)."""
    return with_hash(readable_name(user_name(), folder), folder)


def first_lines(folder: Path) -> tuple[str, ...]:
    """The name a first run writes: the one given (`make up COMPOSE_PROJECT_NAME=...`), or new."""
    name = os.environ.get(VARIABLE)
    if name is None:
        name = new_name(folder)
    check_name(name)
    why = "this checkout's workstation (make ls)"
    return (f"# {why}; the image is {name}/workstation:latest.", f"{VARIABLE}={name}")


@dataclass(frozen=True)
class Settled:
    name: str | None
    written: bool  # .env was written just now (the first run)


def settle(env_file: Path, folder: Path) -> Settled:
    """The checkout's name: the one set (environment, then .env), else chosen now and written."""
    written = dotenv.write_on_first_run(env_file, lambda: first_lines(folder))
    name = dotenv.setting(VARIABLE, env_file)
    if dotenv.env_files() is not None:
        if name is not None:
            check_name(name)
        return Settled(name=name, written=False)  # compose names it; the guard asks compose
    if name is not None and VARIABLE not in dotenv.read_values(env_file):
        # An .env from before, and the name given (`make up COMPOSE_PROJECT_NAME=...`): kept.
        check_name(name)
        dotenv.set_value(env_file, VARIABLE, name, comment="this checkout's workstation (make ls)")
        VOICE.note(f"added {VARIABLE}={name} to {env_file}")
    if name is None:  # an .env from before names were written to it: a name of its own now
        name = new_name(folder)
        dotenv.set_value(env_file, VARIABLE, name, comment="this checkout's workstation (make ls)")
        VOICE.note(f"added {VARIABLE}={name} to {env_file}")
    check_name(name)
    return Settled(name=name, written=written)


def refuse(name: str, folder: Path, docker: Docker) -> None:
    """CannotGoOn when a container of the workstation called `name` is another folder's."""
    containers = [parse(item) for item in inspect_labelled(docker, f"{PROJECT_LABEL}={name}")]
    foreign = [one for one in containers if one.folder and not same_folder(one.folder, folder)]
    if not foreign:
        return
    theirs = foreign[0]
    owner = folder_owner(theirs.folder)
    whose = f"{owner}'s" if owner else f"PUID {theirs.puid}'s"
    # Another user's folder: its name is theirs to choose, escape sequences and all.
    raise CannotGoOn(
        f"the workstation name {name} is in use by {harmless(whose)} workstation from "
        f"{harmless(theirs.folder)} "
        f"(container {theirs.container}, {theirs.state}): this folder ({folder}) must not "
        "touch it, so nothing was started, recreated or removed.",
        HOW_TO_CHOOSE,
    )


def compose_name(compose: Compose) -> str | None:
    """The project name compose itself resolves (-p, environment, .env, COMPOSE_ENV_FILES)."""
    config = compose.run("config", "--format", "json")
    try:
        return str(json.loads(config.stdout)["name"]) if config.returncode == 0 else None
    except (ValueError, KeyError):
        return None


def main(argv: list[str] | None = None) -> int:
    """`make down` / `make build`: the name settled as `make up` does, and guarded."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("compose", nargs="+", help="the compose command, after --")
    compose = Compose(parser.parse_args(argv).compose)
    try:
        settled = settle(Path(".env"), Path.cwd())
        name = compose_name(compose) or settled.name
        if name:
            refuse(name, Path.cwd(), run_docker)
    except CannotGoOn as failed:
        return failed.said()
    return 0


if __name__ == "__main__":
    sys.exit(main())
