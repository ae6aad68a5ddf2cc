"""A throwaway SSH key pair for emulated machines: ed25519, made with cryptography (no ssh-keygen
needed), in the forms both paramiko and the real `ssh` take."""

from __future__ import annotations

import io
from dataclasses import dataclass

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519


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
