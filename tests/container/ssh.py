"""SSH into a test stack with paramiko: a throwaway ed25519 key and non-interactive commands."""

from __future__ import annotations

from dataclasses import dataclass

import paramiko

from tests.machines.docker_nodes import KeyPair, new_key_pair

__all__ = ["KeyPair", "connect", "new_key_pair", "run"]

USER = "dev"


def connect(
    port: int, key: paramiko.PKey | None = None, user: str = USER, password: str | None = None
) -> paramiko.SSHClient:
    """Log in with exactly the given credential: no agent, no ~/.ssh keys of the test machine."""
    client = paramiko.SSHClient()
    # A fresh stack has a fresh host key; the host-key tests compare keys explicitly.
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    client.connect(
        "127.0.0.1",
        port=port,
        username=user,
        pkey=key,
        password=password,
        allow_agent=False,
        look_for_keys=False,
        timeout=15,
        banner_timeout=30,
        auth_timeout=30,
    )
    return client


@dataclass(frozen=True)
class Result:
    exit_code: int
    stdout: str
    stderr: str


def run(client: paramiko.SSHClient, command: str, timeout_s: float = 300) -> Result:
    """A non-interactive command (no pty), as `ssh host 'command'` runs it."""
    _, stdout, stderr = client.exec_command(command, timeout=timeout_s)
    out = stdout.read().decode(errors="replace")
    err = stderr.read().decode(errors="replace")
    return Result(stdout.channel.recv_exit_status(), out, err)


def host_key(port: int) -> str:
    """The server's host key as "type base64", read without logging in."""
    transport = paramiko.Transport(("127.0.0.1", port))
    try:
        transport.start_client(timeout=30)
        key = transport.get_remote_server_key()
        return f"{key.get_name()} {key.get_base64()}"
    finally:
        transport.close()


def offered_auth_methods(port: int, user: str) -> list[str]:
    """What the server lists after a `none` attempt: the methods it would accept for `user`."""
    transport = paramiko.Transport(("127.0.0.1", port))
    try:
        transport.start_client(timeout=30)
        try:
            transport.auth_none(user)
        except paramiko.BadAuthenticationType as refused:
            return list(refused.allowed_types)
        return ["none"]
    finally:
        transport.close()
