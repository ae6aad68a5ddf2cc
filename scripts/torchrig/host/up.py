"""`make up`: start the workstation in the mode this machine allows, wait until it answers, and
say how to reach it, or why not (`up [--cpu 0|1] [--timeout S] -- docker compose ...`).

Before compose builds or touches anything, every name set is checked (torchrig.host.settings),
memlock settled with the engine (torchrig.host.memlock), then what compose would refuse
(torchrig.host.preflight): a recreate that fails has already removed the workstation that ran.
Nor does compose recreate a workstation that runs work without the word (torchrig.host.recreate).

The wait is inside the container (every 50 ms; Docker's healthcheck would add up to 3 s), asked
and answered by one protocol (torchrig.shared.startup). A container that exited or restarts in a
loop is stopped, then its start's recorded error read from it: `restart: unless-stopped` is right
for a crash after hours of work and wrong for a bad setting.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tarfile
import time
from collections import deque
from pathlib import Path

from torchrig.host import (
    buildcheck,
    compose_failure,
    dotenv,
    gpu_mode,
    gpus,
    memlock,
    preflight,
    prepare,
    project,
    recreate,
    settings,
    workstations,
)
from torchrig.host.workstations import Compose
from torchrig.shared import ports, startup
from torchrig.shared.voice import IN_OTHERS_OUTPUT, CannotGoOn, harmless
from torchrig.shared.voice import MAKEFILE as VOICE

SERVICE = workstations.SERVICE
# Generous: a healthy start takes seconds, and a failing one is reported as soon as the container
# stops (the supervisor gives up on a crash loop within a minute).
WAIT_TIMEOUT_S = 300
# The container's own wait ends at the timeout; this is for `docker exec` and the last answer.
ASK_GRACE_S = 30
MAX_LINES = 20
# What `docker cp` writes of the start's record: tar's headers, then the record.
RECORD_TAR_BYTES = 4 * 512 + startup.MAX_START_ERROR_BYTES
COPY_TIMEOUT_S = 30


def inspect_own(compose: Compose) -> dict | None:
    """`docker inspect` of this workstation's container, in any state; None when there is none."""
    ids = compose.run("ps", "--all", "--quiet", SERVICE).stdout.split()
    if not ids:
        return None
    inspected = compose.docker("inspect", ids[0])
    return preflight.parse_inspected(inspected.stdout) if inspected.returncode == 0 else None


def read_state(compose: Compose) -> workstations.Workstation | None:
    inspected = inspect_own(compose)
    return None if inspected is None else workstations.parse(inspected)


def check_before_touching(compose: Compose, go_ahead: bool = False) -> int:
    """What compose would refuse, refused before a recreate removes what runs; a recreate that
    would stop work in the workstation, unless `go_ahead` (`make up RECREATE=1`)."""
    config = compose.run("config", "--format", "json")
    if config.returncode != 0:
        return 0  # prepare said why; compose will again
    inspected = inspect_own(compose)
    try:
        service = compose_failure.service_config(config.stdout, SERVICE)
        preflight.check(service, inspected, prepare.is_free)
        if not go_ahead:
            recreate.check(compose, config.stdout, inspected)
    except CannotGoOn as refused:
        return refused.said()
    return 0


def host_address(publisher: dict) -> str:
    url, port = str(publisher.get("URL") or "127.0.0.1"), publisher.get("PublishedPort")
    return f"[{url}]:{port}" if ":" in url else f"{url}:{port}"


def find_container(compose: Compose) -> tuple[str, list[str]] | None:
    """The service's container id, and `--jupyter ADDRESS --ssh ADDRESS` as compose published."""
    listed = compose.run("ps", "--all", "--format", "json", SERVICE)
    try:
        rows = workstations.parse_ps(listed.stdout) if listed.returncode == 0 else []
    except ValueError:
        rows = []
    if not rows:
        return None
    published: dict[int, str] = {}
    for publisher in rows[0].get("Publishers") or []:
        if publisher.get("PublishedPort"):
            published.setdefault(int(publisher["TargetPort"]), host_address(publisher))
    arguments = []
    for port in ports.PORTS:
        arguments += [
            f"--{port.name}",
            published.get(port.container, f"127.0.0.1:{port.container}"),
        ]
    return str(rows[0]["ID"]), arguments


def ask_container(container: str) -> list[str]:
    """`docker exec` of the protocol's question (torchrig.shared.startup), as its user."""
    return ["exec", "--user", startup.ASK_AS, container, *startup.ASK]


def start_error(archive: bytes | None, since: float) -> str | None:
    """The start's record of its error, from the start of the tar `docker cp` writes of it, when
    it is a small regular file a start since `since` wrote (a record from an earlier start says
    nothing about this one; a folder or a symlink in its place is not the record)."""
    if not archive:
        return None
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            member = tar.next()
            if member is None or not member.isreg() or member.mtime < int(since):
                return None
            if member.size > startup.MAX_START_ERROR_BYTES:
                return None
            read = tar.extractfile(member)
            text = read.read().decode("utf-8", errors="replace") if read else ""
    except tarfile.TarError:
        return None
    return harmless(text).strip() or None


def why_it_stopped(compose: Compose, since: float) -> list[str]:
    """The start's own error, as root recorded it, read from the stopped container; else its
    exit code: it crashed, or failed in dev's steps, whose words only its log has."""
    inspected = inspect_own(compose) or {}
    name = str(inspected.get("Name", "")).lstrip("/")
    record = (
        compose.copy_out(name, startup.START_ERROR, RECORD_TAR_BYTES, COPY_TIMEOUT_S)
        if name
        else None
    )
    said = start_error(record, since)
    if said is None:
        code = (inspected.get("State") or {}).get("ExitCode", "unknown")
        return [f"  its start exited with status {code} (`make logs` shows why)"]
    first, *rest = said.splitlines()
    return [f"  {IN_OTHERS_OUTPUT} error: {first}", *(f"  {line}" for line in rest)][:MAX_LINES]


def failure_report(state: workstations.Workstation, timeout_s: int) -> tuple[str, str]:
    """(what happened, what to do) for a start that did not become ready."""
    if state.failed_to_start:
        return (
            "the workstation did not start:",
            "Stopped it, so it does not restart into the same error: fix the above, then "
            "`make up` again (`make logs` has the whole log).",
        )
    if state.health == "unhealthy":
        return (
            "the workstation runs but is not healthy:",
            "See `make logs`; `make shell` gets you in to look.",
        )
    return (
        f"the workstation was not ready within {timeout_s} s (still starting):",
        "Follow it with `make logs`; `make up` again waits again.",
    )


def report_failure(
    compose: Compose, timeout_s: int, since: float, still_waiting_for: str = ""
) -> int:
    """The container started but did not become ready: why; stopped if its start failed."""
    state = read_state(compose)
    if state is None:
        VOICE.error("the workstation's container is gone (removed while it started).")
        return 1
    what, advice = failure_report(state, timeout_s)
    said = [f"  not answering: {still_waiting_for}"] if still_waiting_for else []
    if state.failed_to_start:
        compose.run("stop", SERVICE)  # first: Docker restarts it no more, its record stays
        said = why_it_stopped(compose, since)
    VOICE.error("\n".join([what, *said]))
    VOICE.note(advice)
    return 1


def report_compose_failure(compose: Compose, up: subprocess.CompletedProcess[str]) -> int:
    """compose itself failed, so no container ran: say what it was (its output is above)."""
    version = compose.run("version", "--short")
    config = compose.run("config", "--format", "json")
    workstation = compose_failure.service_config(config.stdout, SERVICE)
    image, missing = workstation.get("image"), None
    if image and "build" not in workstation:  # compose can only pull it
        present = compose.docker("image", "inspect", "--format", "{{.Id}}", image).returncode == 0
        missing = None if present else image
    facts = compose_failure.FailureFacts(
        compose_version=version.stdout.strip() if version.returncode == 0 else None,
        missing_image=missing,
    )
    lines = compose_failure.diagnose(up.stdout, facts) or [
        f"`docker compose up` failed (exit {up.returncode}) before the workstation "
        "started: compose's own message is above."
    ]
    VOICE.error("\n".join(lines))
    return up.returncode or 1


def wait_until_ready(compose: Compose, timeout_s: int, cpu: bool, since: float) -> int:
    """Ask the container to wait for its services and say how to reach them; report the rest.
    `since`: when this `make up` began, older than any start it caused."""
    found = find_container(compose)
    if found is None:
        return report_failure(compose, timeout_s, since)
    container, addresses = found
    endpoints: deque[str] = deque(maxlen=MAX_LINES)

    def on_line(line: str) -> None:
        if line.startswith(startup.STATUS):
            VOICE.note(f"waiting: {line.removeprefix(startup.STATUS)}")
        else:
            endpoints.append(line)

    try:
        code = compose.ask(
            *ask_container(container),
            "--wait",
            str(timeout_s),
            *addresses,
            on_line=on_line,
            timeout_s=timeout_s + ASK_GRACE_S,
        )
    except subprocess.TimeoutExpired:
        return report_failure(compose, timeout_s, since, "no answer from inside it in time")
    if code == startup.Answer.READY:
        return report_ready(list(endpoints), cpu)
    reason = " ".join(line.removeprefix(startup.NOT_READY) for line in endpoints)
    if code == startup.Answer.WAITED_OUT:
        return report_failure(compose, timeout_s, since, reason)
    if code == startup.Answer.NOT_THE_STARTS:
        VOICE.error(f"the workstation's state is not its start's: {reason}")
        VOICE.note("Code in the container replaced it; `make down && make up` starts afresh.")
        return 1
    return report_asking_failed(compose, timeout_s, since, list(endpoints))


def report_asking_failed(compose: Compose, timeout_s: int, since: float, output: list[str]) -> int:
    """The waiting command ended badly: the container stopped, or the asking itself failed."""
    state = read_state(compose)
    if state is None or state.failed_to_start or state.state != "running":
        return report_failure(compose, timeout_s, since)
    said = [line for line in output if line.strip()][-MAX_LINES:]
    VOICE.error(
        "\n".join(["asking the workstation whether it is ready failed:", *(f"  {x}" for x in said)])
    )
    VOICE.note("It runs: `make logs` shows how its start went; `make up` again asks again.")
    return 1


def claim(compose: Compose, cpu: bool, env_file: Path = Path(".env")) -> int:
    """Before compose runs: the name and the GPUs are no other workstation's. Says the name."""
    name = project.compose_name(compose)
    if name is None:
        return 0  # prepare said why already; compose will again
    try:
        project.refuse(name, Path.cwd(), compose.docker)
        settle_gpus(compose, name, cpu, env_file)
    except CannotGoOn as failed:
        return failed.said()
    VOICE.note(f"workstation {name} (this folder's; `make ls` lists every one on this machine)")
    return 0


def settle_gpus(compose: Compose, name: str, cpu: bool, env_file: Path) -> None:
    """GPUS checked (CPU mode: its spelling only): none another running workstation holds."""
    value = dotenv.setting(gpus.VARIABLE, env_file)
    if cpu:
        gpus.parse_request(value)
        return
    others = [one for one in workstations.all_workstations(compose.docker) if one.project != name]
    share = dotenv.setting(gpus.SHARE_VARIABLE, env_file) == "1"
    gpus.check(value, share, others, gpus.read_host_table())


def settle_memlock(compose: Compose, env_file: Path = Path(".env")) -> int:
    """Before compose builds or makes anything: a memlock the engine grants, written to .env when
    MEMLOCK is unset (torchrig.host.memlock)."""
    config = compose.run("config", "--format", "json")
    if config.returncode != 0:
        return 0  # prepare said why; compose will again
    service = compose_failure.service_config(config.stdout, SERVICE)
    try:
        memlock.settle(compose.docker, service, inspect_own(compose), env_file)
    except CannotGoOn as refused:
        return refused.said()
    return 0


def pass_build_arguments() -> int:
    """compose builds a missing image: pass PYTORCH_VERSION as `make build` does."""
    version, problems = buildcheck.checked_torch_version(os.environ)
    for problem in problems:
        VOICE.error(problem)
    if version is None:
        return 1
    os.environ["PYTORCH_VERSION"] = version
    return 0


def report_ready(endpoints: list[str], cpu: bool) -> int:
    print(f"The workstation is ready{' (CPU mode: no GPUs)' if cpu else ''}:")
    sys.stdout.write("".join(f"  {line}\n" for line in endpoints))
    print("  logs: make logs | shell: make shell | stop: make down")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=int, default=WAIT_TIMEOUT_S, help="seconds to wait")
    parser.add_argument(
        "--cpu", default="", help="1: CPU mode, 0: GPUs, empty: what this machine has (make's CPU)"
    )
    parser.add_argument(
        "--recreate", default="", help="1: recreate even a workstation that runs work (RECREATE)"
    )
    parser.add_argument("compose", nargs="+", help="the compose command, after --")
    args = parser.parse_args(argv)
    compose = Compose(args.compose)
    try:
        go_ahead = recreate.go_ahead(args.recreate)
        settings.check_names(Path.cwd(), Path(".env"), compose.command)
        mode, compose = gpu_mode.decide(args.cpu, compose)
    except CannotGoOn as refused:
        return refused.said()
    if mode.notice:
        VOICE.note("\n".join(mode.notice))
    prepared = (
        prepare.prepare(compose.run)
        or claim(compose, mode.cpu)
        or pass_build_arguments()
        or settle_memlock(compose)
        or check_before_touching(compose, go_ahead)
    )
    if prepared:
        return prepared
    since = time.time()
    up = compose.shown("up", "-d")
    if up.returncode != 0:
        return report_compose_failure(compose, up)
    return wait_until_ready(compose, args.timeout, mode.cpu, since)


if __name__ == "__main__":
    sys.exit(main())
