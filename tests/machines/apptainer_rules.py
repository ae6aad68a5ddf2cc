"""Apptainer's rules, applied through Docker: a simulation of Apptainer, which is not packaged here.

A call's `docker run` runs as the caller's uid and gid, with a read-only root, the host's /tmp,
the caller's HOME and the host's network, pid and IPC namespaces; `exec` skips the entrypoint,
`run` runs it; `--bind`, `--pwd`, `--home` as Apptainer takes them, `--nv` ignored. Not simulated:
SIF (a "`.sif`" here is a text file naming the image), overlays, fakeroot: a test on this proves
the image works under these rules, not that Apptainer runs it. As a program it stands in for
`apptainer`: exec and run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

# A .sif stand-in: one line naming the Docker image it stands for.
SIF_PREFIX = "docker-image: "
# Every container the stand-in starts carries this label, with the value of the variable of the
# same name (the test that started it), so a test can remove what a killed job left running.
LABEL = "TORCHRIG_TESTBED_APPTAINER"
# The caller's variables the container does not take: it sets its own.
NOT_PASSED = {"PATH", "HOME", "LD_LIBRARY_PATH", "HOSTNAME", "PWD", "OLDPWD", "SHLVL", "_"}


@dataclass
class Call:
    action: str
    image: str
    command: list[str]
    binds: list[tuple[str, str]] = field(default_factory=list)
    pwd: str | None = None
    home: str | None = None


def sif_file(path: Path, docker_image: str) -> Path:
    """Write the stand-in for a `.sif` file: the Docker image it names."""
    path.write_text(f"{SIF_PREFIX}{docker_image}\n", encoding="utf-8")
    return path


def docker_image_of(sif: str) -> str:
    text = Path(sif).read_text(encoding="utf-8").strip()
    if not text.startswith(SIF_PREFIX):
        raise SystemExit(f"apptainer (stand-in): {sif} is not a .sif stand-in ({SIF_PREFIX}...)")
    return text.removeprefix(SIF_PREFIX)


def parse(argv: list[str]) -> Call:
    action, *args = argv
    if action not in ("exec", "run"):
        raise SystemExit(f"apptainer (stand-in): only exec and run are simulated, not {action!r}")
    call = Call(action, "", [])
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        if flag in ("--bind", "-B"):  # `a,b:/c`: a folder binds at the same path unless told
            for item in args.pop(0).split(","):
                source, _, destination = item.partition(":")
                call.binds.append((source, destination.split(":")[0] or source))
        elif flag == "--pwd":
            call.pwd = args.pop(0)
        elif flag == "--home":
            call.home = args.pop(0)
        elif flag != "--nv":
            raise SystemExit(f"apptainer (stand-in): option {flag} is not simulated")
    call.image, *call.command = args
    return call


def passed_environment(environ: Mapping[str, str], image: set[str]) -> list[str]:
    """The caller's variables Apptainer passes in: all but PATH and HOME, which the container
    sets, and those the image's own environment defines, whose values win in the container."""
    return sorted(name for name in environ if name not in image | NOT_PASSED)


def docker_argv(
    call: Call,
    docker_image: str,
    uid: int,
    gid: int,
    home: str,
    image_environment: set[str] | None = None,
    tmp: str = "/tmp",
) -> list[str]:
    """The `docker run` that applies Apptainer's rules to the call."""
    home = call.home or home
    argv = [
        "docker", "run", "--rm", "--read-only",
        "--network", "host", "--pid", "host", "--ipc", "host",
        "--user", f"{uid}:{gid}", "--label", f"{LABEL}={os.environ.get(LABEL, '')}",
        "--volume", f"{tmp}:/tmp", "--volume", f"{home}:{home}", "--env", f"HOME={home}",
    ]  # fmt: skip
    for source, destination in call.binds:
        argv += ["--volume", f"{os.path.realpath(source)}:{destination}"]
    if call.pwd:
        argv += ["--workdir", call.pwd]
    passed = passed_environment(os.environ, image_environment or set())
    argv += [f"--env={name}" for name in passed]
    if call.action == "exec":
        argv += ["--entrypoint", call.command[0], docker_image, *call.command[1:]]
    else:
        argv += [docker_image, *call.command]
    return argv


def image_variables(docker_image: str) -> set[str]:
    """The names the image's own environment (Docker's ENV) defines."""
    inspected = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .Config.Env}}", docker_image],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return {entry.partition("=")[0] for entry in json.loads(inspected.stdout) or []}


def main(argv: list[str] | None = None) -> None:
    call = parse(sys.argv[1:] if argv is None else argv)
    home = os.environ.get("HOME") or str(Path.home())
    image = docker_image_of(call.image)
    command = docker_argv(call, image, os.getuid(), os.getgid(), home, image_variables(image))
    # The docker client passes the signals it gets (Slurm's SIGTERM) on to the container.
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
