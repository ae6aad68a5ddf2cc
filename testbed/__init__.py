"""What the tests and the benchmarks both stand on, outside the torchrig package: emulated
machines on this one (containers of the image as nodes, a Slurm cluster of local daemons) and the
training example with the knobs its tests need (traced_train.py). Never part of the image."""

import socket
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
