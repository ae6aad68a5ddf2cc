"""A real Slurm cluster on this machine: munged, one slurmctld and two slurmd (nodes n1 and n2,
each with its own port, spool and pid file through `%n`, NodeAddr=127.0.0.1), all in one
temporary folder on free ports, so it never meets a cluster or munged the machine runs itself.

Settings that are not Slurm's defaults, and why: proctrack/linuxproc and task/none (no cgroups to
delegate; two slurmd on one host); partitions `low` (default) and `high` with partition_prio and
PreemptMode=REQUEUE (`high` requeues `low`, as on a cluster); cred_expire=10 (a requeued job
starts again only once its old credential expired, default 120 s) and sched_interval=2 (default
60 s). At the end every process carrying this cluster's SLURM_CONF is ended by pid.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from torchrig.facts.processes import Reading, read_processes

from testbed import free_port

NODES = ("n1", "n2")
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "scontrol", "sinfo", "squeue", "scancel")
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 90
COMMAND_TIMEOUT_S = 60
CRED_EXPIRE_S = 10  # AuthInfo cred_expire (see the module docstring)


class ClusterError(RuntimeError):
    """The test cluster did not start, or a Slurm command failed."""


def missing_programs() -> list[str]:
    """The Slurm and munge programs the cluster needs that are not on PATH."""
    return [name for name in (*DAEMONS, *CLIENTS) if shutil.which(name) is None]


@dataclass
class Job:
    """One line of `scontrol show job -o`, the fields the tests read."""

    job_id: int
    state: str
    restarts: int
    exit_code: str
    node_list: str

    @classmethod
    def parse(cls, line: str) -> Job:
        fields = dict(reversed(re.findall(r"(?:^|\s)(\w+)=(\S*)", line)))  # the first of each
        try:
            return cls(
                int(fields["JobId"]),
                fields["JobState"],
                int(fields["Restarts"]),
                fields["ExitCode"],
                fields["NodeList"],
            )
        except KeyError as missing:
            raise ClusterError(f"no {missing.args[0]}= in `scontrol show job`: {line}") from None


@dataclass
class SlurmCluster:
    root: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "munge.socket"

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for Slurm's clients (and, through sbatch, the jobs)."""
        return {**os.environ, "SLURM_CONF": str(self.conf), **(extra or {})}

    # -- start and stop --

    def start(self) -> None:
        for folder in ("etc", "state", "spool", "log", "run", "munge"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        self._start_munged()
        self._write_config()
        self._spawn("slurmctld", ["slurmctld", "-D", "-i"])
        for node in NODES:
            self._spawn(f"slurmd-{node}", ["slurmd", "-D", "-N", node])
        self.wait_until(self.nodes_idle, "both nodes idle in sinfo")

    def stop(self) -> None:
        """Cancel every job, stop the daemons, then end whatever still carries our SLURM_CONF."""
        if "slurmctld" in self.processes and self.processes["slurmctld"].poll() is None:
            with contextlib.suppress(ClusterError, subprocess.TimeoutExpired):
                self.cancel_all()
        for process in reversed(self.processes.values()):
            process.terminate()  # nothing if it has exited
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
        for pid in self.leftover_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def leftover_pids(self) -> list[int]:
        """Processes (daemons, slurmstepd, job steps) started with this cluster's SLURM_CONF."""
        found = read_processes(reading=Reading(environ=("SLURM_CONF",)))
        conf = str(self.conf)
        return [
            p.pid for p in found if p.environ.get("SLURM_CONF") == conf and p.pid != os.getpid()
        ]

    def _start_munged(self) -> None:
        folder = self.root / "munge"
        folder.chmod(0o755)  # munged insists that everyone may reach its socket
        key = folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self._spawn("munged", [
            "munged", "--foreground", f"--socket={self.munge_socket}", f"--key-file={key}",
            f"--pid-file={folder / 'munged.pid'}", f"--log-file={folder / 'munged.log'}",
            f"--seed-file={folder / 'munged.seed'}",
        ])  # fmt: skip
        self.wait_until(self.munge_socket.exists, "munged's socket")

    def _write_config(self) -> None:
        host, root, node_list = socket.gethostname().split(".")[0], self.root, ",".join(NODES)
        nodes = "\n".join(
            f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={free_port()} CPUs=1 "
            "State=UNKNOWN"
            for name in NODES
        )
        self.conf.write_text(f"""\
ClusterName=torchrig{os.getpid()}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket},cred_expire={CRED_EXPIRE_S}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
PlugStackConfig={root}/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
KillWait=30
SchedulerParameters=sched_interval=2
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
{nodes}
PartitionName=low Nodes={node_list} Default=YES PriorityTier=1 MaxTime=INFINITE State=UP
PartitionName=high Nodes={node_list} PriorityTier=2 MaxTime=INFINITE State=UP
""")
        (self.root / "etc" / "plugstack.conf").write_text("")  # no SPANK plugins of the host

    def _spawn(self, name: str, argv: list[str]) -> None:
        with (self.root / "log" / f"{name}.out").open("wb") as out:
            self.processes[name] = subprocess.Popen(
                argv, env=self.env(), stdout=out, stderr=subprocess.STDOUT, cwd=self.root
            )

    def nodes_idle(self) -> bool:
        result = self.run("sinfo", "--noheader", "--Node", "--format=%N %t", check=False)
        states = dict(line.split() for line in result.stdout.splitlines() if line.strip())
        return all(states.get(node) == "idle" for node in NODES)

    def wait_until(
        self, condition: Callable[[], bool], what: str, timeout: float = START_TIMEOUT_S
    ) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise ClusterError(
                        f"{name} exited ({process.returncode}) while waiting for {what}:\n"
                        + self.logs()
                    )
            if time.monotonic() > deadline:
                raise ClusterError(f"no {what} within {timeout:.0f} s:\n" + self.logs())
            time.sleep(0.2)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
            for path in sorted((self.root / "log").glob("*"))
        )

    # -- Slurm's commands --

    def run(
        self,
        *argv: str,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        cwd: Path | None = None,
        timeout: float = COMMAND_TIMEOUT_S,
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            list(argv),
            env=self.env(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
            check=False,
        )
        if check and result.returncode != 0:
            raise ClusterError(
                f"`{' '.join(argv)}` exited {result.returncode}:\n{result.stdout}{result.stderr}"
            )
        return result

    def sbatch(
        self,
        script: Path | str,
        *script_args: str,
        options: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> int:
        """Submit; the job id."""
        result = self.run(
            "sbatch", "--parsable", *options, str(script), *script_args, env=env, cwd=cwd
        )
        return int(result.stdout.strip().split(";")[0])

    def job(self, job_id: int) -> Job:
        return Job.parse(self.run("scontrol", "--oneliner", "show", "job", str(job_id)).stdout)

    def wait_until_done(self, job_id: int, timeout: float) -> Job:
        """The job once it has ended for good (not pending again after a requeue)."""
        final = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
        self.wait_until(lambda: self.job(job_id).state in final, f"end of job {job_id}", timeout)
        return self.job(job_id)

    def cancel_all(self) -> None:
        """Cancel every job of this cluster and wait until both nodes are idle again."""
        self.run("scancel", "--user", pwd.getpwuid(os.getuid()).pw_name, check=False)
        self.wait_until(self.nodes_idle, "both nodes idle after scancel", STOP_TIMEOUT_S)
