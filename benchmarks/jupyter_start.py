"""Jupyter's start-up with and without the image's server extensions, inside one container.

    docker run --rm -u 1000 -v "$PWD/benchmarks:/b:ro" --entrypoint /opt/venv/bin/python \\
        "$(docker compose config --images)" /b/jupyter_start.py [--repeats 6]

Starts `jupyter-lab` alternately with jupyter-server-proxy and jupyterlab-nvdashboard off and on
(plus the Host check), and reports the wall time until `/api` answers and the server's CPU time
until then: both variants at the same moments, so the comparison holds on a busy machine.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import time
import urllib.request
from pathlib import Path

from torchrig.facts.processes import read_process

BASE = ["jupyter-lab", "--no-browser", "--ServerApp.token=", "--ServerApp.root_dir=/tmp"]
VARIANTS = {
    "extensions off": [
        "--ServerApp.jpserver_extensions="
        "{'jupyter_server_proxy': False, 'jupyterlab_nvdashboard': False}"
    ],
    "extensions on": [
        "--ServerApp.jpserver_extensions={'torchrig.image.jupyter_hosts': True}",
        "--ServerApp.allow_remote_access=True",
    ],
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=1):
            return True
    except OSError:
        return False


def start_once(arguments: list[str]) -> tuple[float, float]:
    """(wall seconds until /api answers, CPU seconds the server used until then)."""
    port = free_port()
    start = time.perf_counter()
    server = subprocess.Popen(
        [*BASE, f"--port={port}", *arguments],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not answers(port):
            if server.poll() is not None:
                raise SystemExit(f"jupyter-lab exited with {server.returncode}: {arguments}")
            time.sleep(0.02)
        process = read_process(Path(f"/proc/{server.pid}"))
        assert process is not None, "jupyter-lab ended"
        return time.perf_counter() - start, process.cpu_s
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args()
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
    for _ in range(args.repeats):
        for name, arguments in VARIANTS.items():
            runs[name].append(start_once(arguments))
    for name, timings in runs.items():
        walls = [wall for wall, _ in timings]
        cpus = [cpu for _, cpu in timings]
        print(
            f"{name:15s} wall median {statistics.median(walls):.2f} s (min {min(walls):.2f})  "
            f"CPU median {statistics.median(cpus):.2f} s (min {min(cpus):.2f})"
        )
    print(f"load average: {os.getloadavg()[0]:.1f} (1 min)")


if __name__ == "__main__":
    main()
