"""Time from `docker compose up -d` to both services answering, and `import torch` inside.

    python benchmarks/startup.py [--repeats 5] [--cpu] [--json]

Each repeat takes the stack down, starts it, and polls the published ports every 50 ms: Jupyter
is ready when `/api` answers 200, sshd when it sends its `SSH-` banner. Then it reads the CPU
time Jupyter's process has used (its start-up work, which load stretches on the wall clock but
hardly changes) and times `import torch` in the running container. Uses the compose project
`torchrig-bench` (or `$TORCHRIG_BENCH_PROJECT`), free ports on 127.0.0.1 and temporary bind-mount
folders, so it does not touch a running workstation.
Set MEMLOCK in the environment where the engine caps it. Needs a built image (`make build`).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# A second copy of the repository (another branch) benchmarks beside this one under its own name.
PROJECT = os.environ.get("TORCHRIG_BENCH_PROJECT", "torchrig-bench")
IMPORT_TORCH = "import time; t = time.perf_counter(); import torch; print(time.perf_counter() - t)"
# CPU seconds Jupyter's process has used (user + system): its start-up work, which a loaded
# machine stretches on the wall clock but hardly changes.
JUPYTER_CPU = """
import os
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    try:
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        continue
    if any(arg.endswith(b"jupyter-lab") for arg in argv):
        fields = stat[stat.rindex(")") + 2 :].split()
        print((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def compose(args: list[str], env: dict[str, str], cpu: bool) -> subprocess.CompletedProcess:
    files = ["-f", "docker-compose.yml"] + (["-f", "docker-compose.cpu.yml"] if cpu else [])
    command = ["docker", "compose", "-p", PROJECT, *files, *args]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=True)


def jupyter_answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=1) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def sshd_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            return sock.recv(4) == b"SSH-"
    except OSError:
        return False


def time_up(env: dict[str, str], cpu: bool, ports: tuple[int, int]) -> dict[str, float]:
    compose(["down", "-t", "5"], env, cpu)
    start = time.perf_counter()
    compose(["up", "-d"], env, cpu)
    ready: dict[str, float] = {}
    deadline = start + 120
    while len(ready) < 2 and time.perf_counter() < deadline:
        now = time.perf_counter() - start
        if "jupyter_s" not in ready and jupyter_answers(ports[0]):
            ready["jupyter_s"] = now
        if "sshd_s" not in ready and sshd_answers(ports[1]):
            ready["sshd_s"] = now
        time.sleep(0.05)
    if len(ready) < 2:
        raise SystemExit(f"services not ready within 120 s: {ready}")
    ready["both_s"] = max(ready["jupyter_s"], ready["sshd_s"])
    return ready


def time_import_torch(env: dict[str, str], cpu: bool) -> float:
    result = compose(
        ["exec", "-T", "-u", "dev", "workstation", "python", "-c", IMPORT_TORCH], env, cpu
    )
    return float(result.stdout.strip().splitlines()[-1])


def time_jupyter_cpu(env: dict[str, str], cpu: bool) -> float:
    result = compose(["exec", "-T", "workstation", "python", "-c", JUPYTER_CPU], env, cpu)
    return float(result.stdout.strip().splitlines()[-1])


def bench_env(folder: Path, ports: tuple[int, int]) -> dict[str, str]:
    for name in ("workspace", "checkpoints", "data"):
        (folder / name).mkdir()
        if os.geteuid() == 0:  # dev (1000) must be able to write its mounts
            os.chown(folder / name, 1000, 1000)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / "key")], check=True
    )
    return {
        **os.environ,
        "JUPYTER_PORT": str(ports[0]),
        "SSH_PORT": str(ports[1]),
        "WORKSPACE_DIR": str(folder / "workspace"),
        "CHECKPOINT_DIR": str(folder / "checkpoints"),
        "DATA_DIR": str(folder / "data"),
        "SSH_PUBLIC_KEY": (folder / "key.pub").read_text().strip(),
        "PUID": "1000",
        "PGID": "1000",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpu", action="store_true", help="CPU mode (no NVIDIA runtime)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    ports = (free_port(), free_port())
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        env = bench_env(Path(tmp), ports)
        try:
            for _ in range(args.repeats):
                run = time_up(env, args.cpu, ports)
                run["jupyter_cpu_s"] = time_jupyter_cpu(env, args.cpu)
                run["import_torch_s"] = time_import_torch(env, args.cpu)
                runs.append(run)
        finally:
            compose(["down", "-v", "-t", "5"], env, args.cpu)
    summary = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    if args.json:
        print(json.dumps({"runs": runs, "median": summary}, indent=2))
    else:
        for key, value in summary.items():
            spread = ", ".join(f"{run[key]:.2f}" for run in runs)
            print(f"{key:15s} median {value:.2f} s  (runs: {spread})")
        print(f"load average: {os.getloadavg()[0]:.1f} (1 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
