"""`make up` never recreates a workstation that runs someone's work without their word.

Compose recreates the running container when its settings changed (a plain `make up` after a
one-off `make up JUPYTER_PORT=28998` moves Jupyter back, a key added to .env, a rebuilt image),
and a recreate stops everything in it. So before compose runs: whether it would recreate, by
compose's own test (the config hash and the image it labels the container with), and if so what
would stop, read from the engine's process table of the container (`docker top`: nothing of the
image runs for it). Work is every process but the workstation's own (its init, torchrig's start
and the services it supervises, root's checks): a training job, a Jupyter kernel or terminal, an
SSH session, anything else left running. If any would stop, nothing is touched: the error names
them and the word that goes ahead, `make up RECREATE=1`.

What the table says is dev's to choose (a command line is any text): it is read bounded in size
and time, and each line shown is cut short and made harmless.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from torchrig.host import compose_failure
from torchrig.host.workstations import SERVICE, Compose, port_bindings, read_bounded
from torchrig.shared import ports
from torchrig.shared.torchrun import is_agent
from torchrig.shared.voice import CannotGoOn, harmless

VARIABLE = "RECREATE"  # `make up RECREATE=1`: the word to go ahead
GO_AHEAD = "1"
HASH_LABEL = "com.docker.compose.config-hash"
IMAGE_LABEL = "com.docker.compose.image"
# The process table: at most this much, within this time (a table of thousands of processes with
# long command lines is dev's to make).
MAX_TABLE_BYTES = 1024 * 1024
TABLE_TIMEOUT_S = 10.0
SHOWN_CHARS = 120  # of one command line
# What marks the workstation's own processes: torchrig's root-owned copy runs the start (which
# then supervises the services), the healthcheck and `make up`'s questions.
OWN_CODE = "/usr/lib/torchrig"
SHELLS = {"bash", "sh", "dash", "zsh", "fish", "ksh", "tcsh", "csh"}


@dataclass(frozen=True)
class Row:
    """One process of the container, as the engine's `ps` shows it (host pids)."""

    pid: int
    ppid: int
    args: str

    @property
    def argv(self) -> tuple[str, ...]:
        return tuple(self.args.split()) or ("",)

    @property
    def program(self) -> str:
        return PurePath(self.argv[0].rstrip(":")).name.lstrip("-")


def go_ahead(word: str) -> bool:
    """RECREATE's value: 1, or unset (empty); anything else is an error, said with what 1 does."""
    if word not in ("", GO_AHEAD):
        raise CannotGoOn(
            f"{VARIABLE}={word!r} is not 1: `make up {VARIABLE}=1` recreates the workstation even "
            "when that stops work in it; without it, `make up` says what would stop first."
        )
    return word == GO_AHEAD


def parse_table(text: str) -> list[Row]:
    """`docker top CONTAINER -o pid,ppid,args`: a header, then PID PPID COMMAND per line."""
    rows = []
    for line in text.splitlines()[1:]:
        fields = line.split(None, 2)
        if len(fields) >= 2 and fields[0].isdigit() and fields[1].isdigit():
            rows.append(Row(int(fields[0]), int(fields[1]), fields[2] if len(fields) > 2 else ""))
    return rows


def shown(row: Row) -> str:
    """A command line for the terminal as it was typed (`torchrun ...`, not the interpreter that
    runs the console script), cut short, made harmless."""
    argv = row.argv
    if PurePath(argv[0]).name.startswith("python") and argv[1:2] and "/bin/" in argv[1]:
        argv = (PurePath(argv[1]).name, *argv[2:])
    text = " ".join(argv)
    return harmless(text if len(text) <= SHOWN_CHARS else f"{text[: SHOWN_CHARS - 3]}...")


def plural(count: int, what: str) -> str:
    return f"{count} {what}{'' if count == 1 else 's'}"


def own_processes(rows: list[Row], init: int) -> set[int]:
    """The workstation's own: its init, torchrig's root-owned code (the start, which supervises
    the services; the healthcheck), and the services the start supervises."""
    own = {row.pid for row in rows if row.pid == init or OWN_CODE in row.args}
    starts = {row.pid for row in rows if OWN_CODE in row.args}
    return own | {row.pid for row in rows if row.ppid in starts}


def what_would_stop(rows: list[Row], init: int) -> list[str]:
    """One line per kind of work a stop of the container ends: each training job, then how many
    Jupyter kernels, terminals and SSH sessions, then anything else started on its own."""
    by_pid = {row.pid: row for row in rows}
    own = own_processes(rows, init)
    work = [row for row in rows if row.pid not in own]
    jupyter = {pid for pid in own if "jupyter" in by_pid[pid].args}
    lines = [f"a training job: {shown(launched_by(row, by_pid))}" for row in work if is_job(row)]
    kinds = {"Jupyter kernel": 0, "Jupyter terminal": 0, "SSH session": 0}
    others: list[Row] = []
    for row in (row for row in work if row.ppid not in {w.pid for w in work}):  # tops of work
        if "ipykernel" in row.args:
            kinds["Jupyter kernel"] += 1
        elif row.program in ("sshd", "sshd-session"):
            kinds["SSH session"] += 1
        elif row.ppid in jupyter and row.program in SHELLS:
            kinds["Jupyter terminal"] += 1
        elif not any(is_job(one) for one in descendants(row, work)):
            others.append(row)
    lines += [plural(count, kind) for kind, count in kinds.items() if count]
    if others:
        lines.append(f"{plural(len(others), 'other process')}: {shown(others[0])}")
    return lines


def is_job(row: Row) -> bool:
    return is_agent(row.argv)


def launched_by(agent: Row, by_pid: Mapping[int, Row]) -> Row:
    """The `torchrig launch` that started this torchrun, else the agent itself: what was typed."""
    parent = by_pid.get(agent.ppid)
    if parent is not None and "launch" in parent.argv and "torchrig" in parent.args:
        return parent
    return agent


def descendants(top: Row, rows: list[Row]) -> list[Row]:
    found, frontier = [top], {top.pid}
    while frontier:
        children = [row for row in rows if row.ppid in frontier]
        found += children
        frontier = {row.pid for row in children}
    return found


def changes(service: Mapping[str, Any], inspected: Mapping[str, Any], image_id: str) -> str:
    """What compose would recreate the container for, said for a person: the ports, the names of
    the variables (never their values: a token, a key), the image; else its settings."""
    said = []
    held = {ports.VARIABLES.get(target): port for target, _, port in port_bindings(inspected)}
    for variable, _, port in compose_failure.port_rows(dict(service)):
        if held.get(variable, str(port)) != str(port):
            said.append(f"{variable} {held[variable]} -> {port}")
    env = (inspected.get("Config") or {}).get("Env") or []
    # A bare NAME (compose's entry for a variable it passes through unset) sets nothing.
    had = dict(str(item).split("=", 1) for item in env if "=" in str(item))
    wanted = service.get("environment") or {}
    said += [f"{name} changed" for name in sorted(wanted) if had.get(name) != wanted[name]]
    if image_id != labels_of(inspected).get(IMAGE_LABEL):
        said.append("a new image" if image_id else "the image, built again")
    return ", ".join(said) or "its settings changed"


def labels_of(inspected: Mapping[str, Any]) -> Mapping[str, str]:
    return (inspected.get("Config") or {}).get("Labels") or {}


def same_config(compose: Compose, inspected: Mapping[str, Any]) -> bool:
    """Whether compose's hash of the workstation's config now is the one it made it with."""
    hashed = compose.run("config", "--hash", SERVICE)
    return hashed.returncode == 0 and hashed.stdout.split()[-1:] == [
        labels_of(inspected).get(HASH_LABEL)
    ]


def image_id_of(compose: Compose, image: str) -> str:
    """The id of the image compose would run; '' when it is not here (compose builds it)."""
    found = compose.docker("image", "inspect", "--format", "{{.Id}}", image)
    return found.stdout.strip() if found.returncode == 0 else ""


def check(compose: Compose, config_json: str, inspected: Mapping[str, Any] | None) -> None:
    """CannotGoOn when this `make up` would recreate the running workstation and stop work in it
    (or what runs there cannot be read): before compose touches anything."""
    if not inspected or (inspected.get("State") or {}).get("Status") != "running":
        return  # nothing runs to stop
    service = compose_failure.service_config(config_json, SERVICE)
    image_id = image_id_of(compose, str(service.get("image", "")))
    if same_config(compose, inspected) and image_id == labels_of(inspected).get(IMAGE_LABEL):
        return  # compose leaves it running
    why = changes(service, inspected, image_id)
    container = str(inspected.get("Id", ""))
    top = [compose.command[0], "top", container, "-o", "pid,ppid,args"]
    table = read_bounded(top, MAX_TABLE_BYTES, TABLE_TIMEOUT_S, whole=True)
    if table is None:
        raise CannotGoOn(
            f"this `make up` would recreate the workstation ({why}), and what runs in it could "
            "not be read (`docker top`), so nothing was changed.",
            f"  To recreate it anyway, stopping whatever runs there: `make up {VARIABLE}=1`.",
        )
    init = int((inspected.get("State") or {}).get("Pid") or 0)
    stops = what_would_stop(parse_table(table.decode("utf-8", errors="replace")), init)
    if stops:
        raise CannotGoOn(
            f"this `make up` would recreate the workstation ({why}), which stops what runs in "
            "it, so nothing was changed:",
            *(f"  {line}" for line in stops),
            f"  To go ahead, stopping them: `make up {VARIABLE}=1` (a job gets STOP_GRACE "
            "seconds to save first). To keep them, run `make up` with the settings it runs "
            "with, or not at all.",
        )
