"""A faked /proc: the files `torchrig.facts.processes` reads, for the processes a test describes."""

from __future__ import annotations

import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def fake_proc(root: Path, uptime_s: float, processes: list[dict]) -> Path:
    """`processes`: dicts of pid, ppid, argv, started_s (seconds after boot), and optionally
    comm, state (default "S"), cpu_s (user time), env (a dict),
    hidden (environ unreadable, as another user's)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "uptime").write_text(f"{uptime_s:.2f} 12345.67\n")
    for process in processes:
        folder = root / str(process["pid"])
        folder.mkdir()
        (folder / "cmdline").write_bytes(b"".join(arg.encode() + b"\0" for arg in process["argv"]))
        comm = process.get("comm", Path(process["argv"][0]).name if process["argv"] else "kthread")
        start = int(process.get("started_s", 0) * TICKS)
        utime = int(process.get("cpu_s", 0) * TICKS)
        # Fields after "(comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt
        # cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime ...
        state = process.get("state", "S")
        rest = [state, str(process["ppid"]), *["0"] * 9, str(utime), *["0"] * 7, str(start)]
        (folder / "stat").write_text(f"{process['pid']} ({comm}) {' '.join([*rest, '0', '0'])}\n")
        (folder / "status").write_text(f"Name:\t{comm}\nSigIgn:\t0000000000000000\n")
        if process.get("hidden"):
            continue
        env = process.get("env", {})
        (folder / "environ").write_bytes(b"".join(f"{k}={v}\0".encode() for k, v in env.items()))
    return root
