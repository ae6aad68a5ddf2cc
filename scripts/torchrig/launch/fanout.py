"""One OpenSSH `ssh` per host: commands started together, output prefixed, taken down together.

Every session keeps its stdin open: the remote end (remote.py) stops its command when it ends,
so a launcher that dies (even by SIGKILL) stops every host. `ssh` runs in a session of its own,
so a Ctrl-C reaches only the launcher, which then takes every host down in order."""

from __future__ import annotations

import contextlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from torchrig.facts import children
from torchrig.launch.hostfile import HostsError
from torchrig.launch.remote import STARTED
from torchrig.shared.voice import MAX_LINE_BYTES, Voice, harmless, size_text

# BatchMode: fail instead of asking for a password or passphrase nobody will type. The keep-alive
# notices a host that vanished (a killed container, a pulled cable) in about 15 s.
SSH_OPTIONS = (
    "-o", "BatchMode=yes",
    "-o", "ConnectTimeout=10",
    "-o", "ServerAliveInterval=5",
    "-o", "ServerAliveCountMax=3",
    "-o", "LogLevel=ERROR",
)  # fmt: skip
# `ssh` exits 255 for its own failures (connection refused, lost, key refused) and otherwise with
# the remote command's status.
SSH_FAILED = 255
LINE_END = re.compile(rb"[\r\n]+")  # tqdm redraws with \r: each redraw is a line of its own

LineHandler = Callable[[str, str, str], None]  # (host, "out" | "err", text)


def ssh_command(host: str, remote_argv: list[str], cwd: str | None = None) -> list[str]:
    """`ssh ... host 'cd CWD && exec COMMAND'`, every word quoted for the remote shell."""
    remote = shlex.join(remote_argv)
    if cwd is not None:
        remote = f"cd {shlex.quote(cwd)} && exec {remote}"
    return ["ssh", "-T", *SSH_OPTIONS, host, remote]


def ssh_hostname(host: str) -> str:
    """The address `ssh` connects to for `host` after ~/.ssh/config (`ssh -G`)."""
    if shutil.which("ssh") is None:
        raise HostsError("no `ssh` on PATH: install the OpenSSH client (openssh-client)")
    result = subprocess.run(
        ["ssh", "-G", host], capture_output=True, text=True, timeout=30, check=False
    )
    for line in result.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key == "hostname" and value:
            return value
    return host


def read_lines(stream: IO[bytes], emit: Callable[[str], None]) -> None:
    """Hand over each line as soon as it is complete (\\n or \\r), decoded leniently and made
    harmless: another host's output reaches this terminal. A line longer than MAX_LINE_BYTES is
    cut there and the rest of it dropped, so none is held whole."""
    pending = b""
    cutting = False  # the start of the line that comes was shown already, cut
    while chunk := stream.read1(65536):  # type: ignore[attr-defined]
        *complete, pending = LINE_END.split(pending + chunk)
        for line in complete:
            if not cutting:
                emit_line(line, emit)
            cutting = False
        if len(pending) > MAX_LINE_BYTES:
            if not cutting:
                cut = harmless(pending[:MAX_LINE_BYTES].decode(errors="replace"))
                emit(f"{cut} [... line cut at {size_text(MAX_LINE_BYTES, digits=None)}]")
            cutting, pending = True, b""
    if not cutting:
        emit_line(pending, emit)


def emit_line(line: bytes, emit: Callable[[str], None]) -> None:
    if line.strip():  # tqdm clears its line with spaces: nothing to show
        emit(harmless(line.decode(errors="replace")))


@dataclass
class Session:
    """One `ssh` process, its output read on two threads. A quiet one (a host tried again) holds
    its lines until the remote wrapper started: before, they are `ssh`'s complaints, said once."""

    host: str
    process: subprocess.Popen[bytes]
    on_line: LineHandler
    quiet: bool = False
    on_started: Callable[[str], None] | None = None
    started: bool = False  # the remote wrapper said so
    held: list[tuple[str, str]] = field(default_factory=list)
    readers: list[threading.Thread] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def start(cls, host: str, argv: list[str], on_line: LineHandler, **options: Any) -> Session:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        session = cls(host, process, on_line, **options)
        for name, stream in (("out", process.stdout), ("err", process.stderr)):

            def emit(text: str, name: str = name) -> None:
                session.receive(name, text)

            reader = threading.Thread(target=read_lines, args=(stream, emit), daemon=True)
            reader.start()
            session.readers.append(reader)
        return session

    def receive(self, stream: str, text: str) -> None:
        with self.lock:
            if text == STARTED:
                self.started = True
                if self.on_started is not None:
                    self.on_started(self.host)
                for held in self.held:
                    self.on_line(self.host, *held)
                self.held.clear()
            elif self.quiet and not self.started:
                self.held.append((stream, text))
            else:
                self.on_line(self.host, stream, text)

    def close_stdin(self) -> None:
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()

    def finish(self) -> int:
        """Its exit status, once its output has been read to the end."""
        code = self.process.wait()
        for reader in self.readers:
            reader.join(timeout=10)
        return code

    def kill(self) -> None:
        """SIGKILL `ssh` and whatever it started (a ProxyCommand): its whole process group."""
        children.signal_group(self.process, signal.SIGKILL)


def take_down(sessions: Iterable[Session], grace_s: float) -> None:
    """End every host's stdin (its request to stop), wait, then kill the `ssh` processes."""
    sessions = list(sessions)
    for session in sessions:
        session.close_stdin()
    try:
        deadline = time.monotonic() + grace_s
        while any(s.process.poll() is None for s in sessions) and time.monotonic() <= deadline:
            time.sleep(0.1)
    finally:
        for session in sessions:
            if session.process.poll() is None:
                session.kill()
            session.finish()


class Printer:
    """Each host's lines, prefixed with its name; whole lines only, never run together."""

    def __init__(
        self,
        hosts: Iterable[str],
        out: IO[str] | None = None,
        err: IO[str] | None = None,
        command: str = "launch",
    ) -> None:
        self.width = max((len(host) for host in hosts), default=0)
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.voice = Voice.of_command(command, self.err)
        self.lock = threading.Lock()

    def __call__(self, host: str, stream: str, text: str) -> None:
        target = self.out if stream == "out" else self.err
        with self.lock:
            target.write(f"{host:<{self.width}}: {text}\n")
            target.flush()

    def note(self, text: str) -> None:
        with self.lock:
            self.voice.note(text)

    def warning(self, text: str) -> None:
        with self.lock:
            self.voice.warning(text)


@dataclass
class Captured:
    code: int | None  # None: still running at the deadline, stopped
    out: list[tuple[float, str]] = field(default_factory=list)  # (time received, line)
    err: list[str] = field(default_factory=list)

    @property
    def stderr(self) -> str:
        return "\n".join(self.err)


def capture_all(commands: Mapping[str, list[str]], timeout_s: float) -> dict[str, Captured]:
    """One command per host at once, output collected; at the deadline everything still running
    is stopped."""
    results = {host: Captured(code=None) for host in commands}

    def collect(host: str, stream: str, text: str) -> None:
        if stream == "out":
            results[host].out.append((time.time(), text))
        else:
            results[host].err.append(text)

    sessions = {host: Session.start(host, argv, collect) for host, argv in commands.items()}
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if all(session.process.poll() is not None for session in sessions.values()):
                break
            time.sleep(0.05)
    finally:
        for host, session in sessions.items():
            stopped = session.process.poll() is None
            if stopped:
                session.close_stdin()
                session.kill()
            code = session.finish()
            results[host].code = None if stopped else code
    return results


@dataclass
class JobPolicy:
    """How the job treats a host that ends early."""

    # Hosts whose loss ends the job (`job.run_job` adds the first one: it holds the rendezvous).
    essential: set[str] = field(default_factory=set)
    # A host whose connection drops (and is not essential) is started again this long after, while
    # the job runs (elastic rejoin).
    retry_s: float = 5.0
    # After the others finished, how long a host that rejoined may take to finish too.
    drain_s: float = 60.0
    # How long hosts get to stop their workers when the job is taken down.
    grace_s: float = 45.0


class FanOut:
    """Every host's command, run to the end together; see `run`."""

    def __init__(
        self, commands: Mapping[str, list[str]], printer: Printer, policy: JobPolicy
    ) -> None:
        self.commands = dict(commands)
        self.printer = printer
        self.policy = policy
        self.sessions: dict[str, Session] = {}
        self.lost: dict[str, float] = {}  # host -> when to try it again
        self.away: dict[str, str] = {}  # host -> why the last try failed, as last reported
        self.finished: set[str] = set()
        self.drain_deadline: float | None = None

    def start(self, host: str, rejoining: bool = False) -> None:
        on_started = self.announce_rejoin if rejoining else None
        self.sessions[host] = Session.start(
            host, self.commands[host], self.printer, quiet=rejoining, on_started=on_started
        )

    def announce_rejoin(self, host: str) -> None:
        self.away.pop(host, None)
        self.printer.note(f"{host}: answering again, rejoining the job")

    def run(self) -> int:
        """0 when every host finished (a lost one may be missing), else the first failure's status;
        130 on Ctrl-C."""
        try:
            for host in self.commands:
                self.start(host)
            while True:
                code = self.step(time.monotonic())
                if code is not None:
                    return code
                time.sleep(0.1)
        except KeyboardInterrupt:
            self.printer.note("interrupted: stopping every host")
            take_down(self.sessions.values(), self.policy.grace_s)
            return 130

    def step(self, now: float) -> int | None:
        for host, session in list(self.sessions.items()):
            if session.process.poll() is None:
                continue
            code = session.finish()
            del self.sessions[host]
            failure = self.ended(host, session, code, now)
            if failure is not None:
                take_down(self.sessions.values(), self.policy.grace_s)
                return failure
        return self.progress(now)

    def ended(self, host: str, session: Session, code: int, now: float) -> int | None:
        """Book one host's end; the job's exit status when it ends the job."""
        if code == 0:
            self.finished.add(host)
            return None
        lost = code == SSH_FAILED
        if session.quiet:
            # Still unreachable, or it came back too late for this round: the job is not at
            # stake (the hosts that stayed decide it), so try again while it runs.
            self.report_failed_rejoin(session, code)
            self.lost[host] = now + self.policy.retry_s
            return None
        if lost and host not in self.policy.essential:
            self.printer.note(
                f"{host}: connection lost; the job goes on without it, and it rejoins when it "
                "answers again"
            )
            self.lost[host] = now + self.policy.retry_s
            return None
        what = "connection lost" if lost else f"exited {code}"
        self.printer.note(f"{host}: {what}: stopping every host")
        return code

    def report_failed_rejoin(self, session: Session, code: int) -> None:
        if session.started:
            self.printer.note(f"{session.host}: rejoining ended (exit {code}); trying again")
            return
        reason = session.held[-1][1] if session.held else f"exit {code}"
        if self.away.get(session.host) != reason:
            self.away[session.host] = reason
            self.printer.note(f"{session.host}: still away ({reason}); trying every few seconds")

    def progress(self, now: float) -> int | None:
        """Retry lost hosts while the job runs; finish once the job is done."""
        original = [s for s in self.sessions.values() if not s.quiet]
        job_done = not original and bool(self.finished)
        if not job_done:
            for host, when in list(self.lost.items()):
                if now >= when:
                    del self.lost[host]
                    self.start(host, rejoining=True)
            return None
        self.lost.clear()  # the job is over: no more tries
        if not self.sessions:
            return 0
        if self.drain_deadline is None:
            self.drain_deadline = now + self.policy.drain_s
        elif now > self.drain_deadline:
            take_down(self.sessions.values(), self.policy.grace_s)
            return 0
        return None
