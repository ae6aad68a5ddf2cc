"""SSH into a test stack with paramiko: a throwaway ed25519 key and non-interactive commands."""

from __future__ import annotations

import io
from dataclasses import dataclass

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

USER = "dev"


@dataclass(frozen=True)
class KeyPair:
    private: paramiko.Ed25519Key
    public_line: str  # "ssh-ed25519 AAAA... comment", what SSH_PUBLIC_KEY takes
    private_text: str  # the OpenSSH private key file's text, for the real `ssh -i`


def new_key_pair() -> KeyPair:
    """A fresh ed25519 pair (cryptography, so no ssh-keygen is needed on the test machine)."""
    key = ed25519.Ed25519PrivateKey.generate()
    private_text = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    private = paramiko.Ed25519Key.from_private_key(io.StringIO(private_text))
    return KeyPair(
        private=private, public_line=public.decode() + " torchrig-test", private_text=private_text
    )


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
