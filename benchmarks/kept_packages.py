"""Figures of the kept packages and the pinned stack (docs/benchmarks.md), measured in
a running workstation.

    python benchmarks/kept_packages.py CONTAINER [--repeats 5] [--json]

Each command runs in the container with `docker exec`, timed there by bash's `time`.
Needs PyPI to be reachable from the container (torch-ema is 6 kB).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess

SMALL = "torch-ema==0.3"
PREPARE = (
    "import sys, time; sys.path.insert(0, '/usr/lib/torchrig'); from pathlib import Path; "
    "from torchrig.packages import kept; root = Path(sys.argv[1]); root.mkdir(exist_ok=True); "
    "t = time.perf_counter(); kept.prepare(root, now=time.time()); "
    "print(f'{time.perf_counter() - t:.3f}')"
)


def in_container(container: str, user: str, script: str) -> str:
    result = subprocess.run(
        ["docker", "exec", "-u", user, container, "bash", "-lc", script],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"{script!r} as {user} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def timed(container: str, user: str, command: str, repeats: int, before: str = ":") -> list[float]:
    """Wall seconds of `command`, `repeats` times (`before` runs untimed ahead of each)."""
    script = (
        f"TIMEFORMAT=%R; for _ in $(seq {repeats}); do {before} >/dev/null 2>&1; "
        f"{{ time {command} >/dev/null 2>&1; }} 2>&1; done; true"
    )
    return [float(line) for line in in_container(container, user, script).split()]


def summary(seconds: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(seconds), 3), "min_s": round(min(seconds), 3)}


def measure(container: str, repeats: int) -> dict[str, object]:
    figures: dict[str, object] = {}
    for tool, command in (("pip", "pip install --no-input"), ("uv", "uv pip install")):
        figures[f"{tool} refuses torch==2.12.0"] = summary(
            timed(container, "dev", f"{command} torch==2.12.0", repeats)
        )
    figures[f"uv installs {SMALL}"] = summary(
        timed(container, "dev", f"uv pip install {SMALL}", repeats, f"uv pip uninstall {SMALL}")
    )
    bare = in_container(
        container, "dev", f"/opt/uv/bin/uv pip install --dry-run {SMALL} 2>&1 || true"
    )
    figures["the bare uv would install"] = [
        line.strip() for line in bare.splitlines() if line.strip().startswith("+ ")
    ]
    starts = {
        "python -c pass, kept venv, as dev": ("dev", "/opt/packages/venv/bin/python -c pass"),
        "python -c pass, image's, as dev": ("dev", "/opt/venv/bin/python -c pass"),
        "python -c pass, image's, as root": ("root", "/opt/venv/bin/python -c pass"),
    }
    for name, (user, command) in starts.items():
        figures[name] = summary(timed(container, user, command, repeats * 4))
    folder = "/tmp/kept-packages-benchmark"
    prepare = f"/usr/bin/python3 -I -S -c {shlex.quote(PREPARE)} {folder}"
    first = float(in_container(container, "dev", f"rm -rf {folder}; {prepare}"))
    later = [float(in_container(container, "dev", prepare)) for _ in range(repeats)]
    figures["kept.prepare, fresh folder"] = {"s": first}
    figures["kept.prepare, again"] = summary(later)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("container", help="the running workstation's container (name or id)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = measure(args.container, args.repeats)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for name, value in figures.items():
            print(f"{name}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
