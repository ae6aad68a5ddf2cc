"""VS Code Remote-SSH, done the way its server install does it, with the real OpenSSH client.

Remote-SSH runs `ssh -T host bash` with an install script on stdin, unpacks the server with
`tar` (fetched by `curl` in the container, or sent over the connection when the container has
no internet), starts it on 127.0.0.1 inside the container and reaches it through a forwarded
local port (`ssh -L`).
"""

from __future__ import annotations

import io
import secrets
import subprocess
import tarfile
import urllib.request
from collections.abc import Callable, Iterator

import pytest

from .ssh import KeyPair
from .stack import Stack, free_port, wait_until
from .tools import openssh_client

pytestmark = [pytest.mark.container, pytest.mark.timeout(300, func_only=True)]

# Inside the container only: nothing publishes it, so only the forward can reach it.
SERVER_PORT = 8765
# The server stops on its own: no process outlives the test in the shared stack.
SERVER_LIFETIME_S = 240

Ssh = Callable[..., list[str]]


@pytest.fixture(scope="module")
def ssh_command(
    running_stack: Stack, ssh_keys: KeyPair, tmp_path_factory: pytest.TempPathFactory
) -> Ssh:
    """`ssh <options> dev@127.0.0.1 <args>` with the stack's key and nothing of this machine's
    own ssh set-up (config, agent, known hosts)."""
    client = openssh_client()
    key = tmp_path_factory.mktemp("ssh") / "id_ed25519"
    key.write_text(ssh_keys.private_text)
    key.chmod(0o600)

    def command(*args: str) -> list[str]:
        return [
            client,
            "-F",
            "/dev/null",
            "-i",
            str(key),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "LogLevel=ERROR",
            "-p",
            str(running_stack.ssh_port),
            *args,
        ]

    return command


def run(command: list[str], stdin: bytes = b"", timeout_s: float = 120) -> tuple[int, str]:
    result = subprocess.run(command, input=stdin, capture_output=True, timeout=timeout_s)
    return result.returncode, (result.stdout + result.stderr).decode(errors="replace")


def test_bash_runs_a_script_sent_on_stdin(ssh_command: Ssh) -> None:
    script = b'echo "user=$(id -un)"\nbash -lc \'echo "login venv=$VIRTUAL_ENV"\'\nuname -s\n'
    code, output = run(ssh_command("-T", "dev@127.0.0.1", "bash"), stdin=script)
    assert code == 0, output
    assert output.splitlines() == ["user=dev", "login venv=/opt/packages/venv", "Linux"]


def test_tar_unpacks_an_archive_sent_over_the_connection(ssh_command: Ssh) -> None:
    marker = secrets.token_hex(8)
    code, output = run(
        ssh_command(
            "dev@127.0.0.1",
            'dir="$(mktemp -d)" && tar -xzf - -C "$dir" && "$dir/server/bin/start.sh"',
        ),
        stdin=server_tarball(f"#!/bin/sh\necho started {marker}\n"),
    )
    assert code == 0, output
    assert output.strip() == f"started {marker}"


def server_tarball(script: str) -> bytes:
    """A .tar.gz with an executable server/bin/start.sh, like a server download."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = script.encode()
        member = tarfile.TarInfo("server/bin/start.sh")
        member.size = len(data)
        member.mode = 0o755
        archive.addfile(member, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def server_in_container(ssh_command: Ssh) -> Iterator[str]:
    """An HTTP server on 127.0.0.1:SERVER_PORT inside the container, started over SSH as dev;
    yields the secret text it serves."""
    secret = secrets.token_hex(16)
    home = f"/tmp/remote-ssh-{secret}"
    # $$ is the server's pid after `exec`: the stop below needs no pattern matching.
    start = (
        f"mkdir {home} && echo {secret} > {home}/probe.txt && echo $$ > {home}/pid && "
        f"exec timeout {SERVER_LIFETIME_S} python -m http.server {SERVER_PORT} "
        f"--bind 127.0.0.1 --directory {home}"
    )
    server = subprocess.Popen(
        ssh_command("-T", "dev@127.0.0.1", start),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield secret
    finally:
        stop(server)
        # Closing the session does not signal a command that has no terminal: stop it here.
        run(ssh_command("dev@127.0.0.1", f"kill $(cat {home}/pid); rm -rf {home}"))


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def test_curl_and_a_forwarded_port_reach_a_server_in_the_container(
    ssh_command: Ssh, server_in_container: str
) -> None:
    url = f"http://127.0.0.1:{SERVER_PORT}/probe.txt"

    def curl_in_container() -> bool:
        code, output = run(ssh_command("dev@127.0.0.1", f"curl -fsS {url}"))
        return code == 0 and output.strip() == server_in_container

    wait_until("curl in the container to fetch from the server", curl_in_container, timeout_s=90)

    local_port = free_port()
    forward = subprocess.Popen(
        ssh_command(
            "-N",
            "-o",
            "ExitOnForwardFailure=yes",
            "-L",
            f"127.0.0.1:{local_port}:127.0.0.1:{SERVER_PORT}",
            "dev@127.0.0.1",
        ),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(
            "the server to answer through the forwarded port",
            lambda: fetch(f"http://127.0.0.1:{local_port}/probe.txt") == server_in_container,
            timeout_s=60,
            on_timeout=lambda: forward_state(forward),
        )
    finally:
        stop(forward)


def fetch(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.read().decode().strip()
    except OSError:
        return ""


def forward_state(forward: subprocess.Popen[bytes]) -> str:
    if forward.poll() is None:
        return "ssh -L is still running"
    assert forward.stderr is not None
    return f"ssh -L exited {forward.returncode}: {forward.stderr.read().decode(errors='replace')}"


def test_sshd_config_allows_tcp_forwarding(running_stack: Stack) -> None:
    # sshd's effective settings, as the container's sshd (run as dev) reads them.
    code, output = running_stack.exec(
        "/usr/sbin/sshd -T -f /etc/torchrig/sshd_config -p 2222", user="dev"
    )
    assert code == 0, output
    settings = dict(line.split(" ", 1) for line in output.splitlines() if " " in line)
    assert settings["allowtcpforwarding"] == "yes"
    assert settings["disableforwarding"] == "no"
    assert settings["permitopen"] == "any"
