"""Run the given command in place of the start, or the services SERVICES names: restart one that
dies (after RESTART_DELAY_S, doubled for each quick exit in a row), stop everything on
SIGTERM/SIGINT.

The services run in sessions of their own, so that tini's signal reaches this process alone and
the stop (stopping.py: every process in the container) stays in order. A service that exits
GIVE_UP_AFTER times in a row, each within QUICK_EXIT_S of its start, cannot start: the
supervisor stops with its error and status 1 (then `make up` reports it) instead of retrying.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from torchrig.image import jupyter, ssh
from torchrig.image.settings import STOP_GRACE_DEFAULT_S, VOICE, Settings, SetupError
from torchrig.image.stopping import Stopper

POLL_S = 0.2
RESTART_DELAY_S = 1.0
# A service that ran this long before dying counts as healthy: its count of quick exits starts
# over. Three tries take 3 s of delays plus the service's start-up each (up to 20 s measured on a
# loaded 2-core machine): inside the healthcheck's 60 s start period, so `make up` sees the stop.
QUICK_EXIT_S = 60.0
GIVE_UP_AFTER = 3
EXIT_GAVE_UP = 1


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    argv: Sequence[str]
    env: Mapping[str, str] | None = None


def service_specs(
    settings: Settings, sshd_ok: bool, state: Path, reach: str = jupyter.REACHED_BY_MAKE
) -> list[ServiceSpec]:
    """The services SERVICES names, in its order; sshd only when it can run (`sshd_ok`)."""
    specs = []
    for name in settings.services:
        if name == "jupyter":
            argv, env = jupyter.prepare_jupyter(settings, state, dict(os.environ), reach)
            specs.append(ServiceSpec("jupyter", argv, env))
        elif name == "sshd" and sshd_ok:
            specs.append(ServiceSpec("sshd", ssh.sshd_command(settings.bind_addr)))
    if settings.services == ("sshd",) and not sshd_ok:
        raise SetupError(
            "SERVICES=sshd but there is no SSH key, so nothing would run: set SSH_PUBLIC_KEY, "
            "or add jupyter to SERVICES."
        )
    return specs


def run_command(command: list[str]) -> int:
    """The given command in place of this process (no services then)."""
    try:
        os.execvp(command[0], command)
    except FileNotFoundError as exc:
        raise SetupError(f"command not found: {command[0]!r}") from exc
    except PermissionError as exc:
        raise SetupError(f"command not executable: {command[0]!r}") from exc
    return 127  # not reached


@dataclass
class Running:
    spec: ServiceSpec
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restart_at: float | None = None
    restarts: int = 0
    quick_exits: int = 0


@dataclass
class Supervisor:
    specs: Sequence[ServiceSpec]
    services: list[Running] = field(default_factory=list)
    stop_signal: int | None = None
    stop_grace_s: float = STOP_GRACE_DEFAULT_S
    give_up_after: int = GIVE_UP_AFTER
    gave_up: str | None = None  # why a service cannot start, once it is given up on

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._request_stop)
        signal.signal(signal.SIGINT, self._request_stop)
        self.services = [Running(spec) for spec in self.specs]
        for service in self.services:
            self._start(service)
        if not self.services:
            VOICE.note("no services to run (SERVICES is empty): waiting for a stop signal")
        while self.stop_signal is None and self.gave_up is None:
            self._tick()
            time.sleep(POLL_S)
        if self.gave_up is not None:
            VOICE.error(self.gave_up)
            self._stop_all()
            return EXIT_GAVE_UP
        return self._stop_all()

    def _request_stop(self, signum: int, _frame: object) -> None:
        self.stop_signal = signum

    def _start(self, service: Running) -> None:
        try:
            service.process = subprocess.Popen(
                list(service.spec.argv), env=service.spec.env, start_new_session=True
            )
        except OSError as exc:
            VOICE.error(f"{service.spec.name} could not start ({exc}); will retry")
            service.process = None
            self._schedule_restart(service, ran_for_s=0.0)
            return
        service.started_at = time.monotonic()
        service.restart_at = None
        VOICE.note(f"started {service.spec.name}")

    def _tick(self) -> None:
        now = time.monotonic()
        for service in self.services:
            if service.process is not None:
                code = service.process.poll()
                if code is None:
                    continue
                ran_for = now - service.started_at
                service.process = None
                self._schedule_restart(service, ran_for, code)
            elif service.restart_at is not None and now >= service.restart_at:
                service.restarts += 1
                VOICE.note(f"restarting {service.spec.name} (restart #{service.restarts})")
                self._start(service)

    def _schedule_restart(
        self, service: Running, ran_for_s: float, code: int | None = None
    ) -> None:
        service.quick_exits = count_quick_exits(service.quick_exits, ran_for_s)
        if service.quick_exits >= self.give_up_after:
            last = describe_exit(code) if code is not None else "could not start"
            self.gave_up = (
                f"{service.spec.name} cannot start: it exited {service.quick_exits} times in a "
                f"row within {QUICK_EXIT_S:.0f} s of starting (last: {last}); stopping the "
                "container instead of retrying forever. Its own messages are above (`make logs`)."
            )
            return
        delay = RESTART_DELAY_S * 2 ** max(service.quick_exits - 1, 0)
        service.restart_at = time.monotonic() + delay
        if code is not None:
            VOICE.error(
                f"{service.spec.name} exited with {describe_exit(code)} after {ran_for_s:.1f} s; "
                f"restarting in {delay:.0f} s"
            )

    def _stop_all(self) -> int:
        reason = (
            f"{signal.Signals(self.stop_signal).name} received" if self.stop_signal else "gave up"
        )
        names = ", ".join(s.spec.name for s in self.services) or "no service"
        VOICE.note(
            f"{reason}: stopping {names} and every process started in the container "
            f"(up to {self.stop_grace_s:g} s to finish: STOP_GRACE)"
        )
        Stopper(
            grace_s=self.stop_grace_s,
            root=os.getppid(),  # tini, PID 1: so every process in the container
            exclude=frozenset({os.getpid()}),
            reap=self._reap,
        ).run()
        self._reap()
        return 0

    def _reap(self) -> None:
        """Collect the services that ended (they are this process's children)."""
        for service in self.services:
            if service.process is not None:
                service.process.poll()


def count_quick_exits(previous: int, ran_for_s: float) -> int:
    """Quick exits in a row, this one included; a run longer than QUICK_EXIT_S starts over."""
    return previous + 1 if ran_for_s < QUICK_EXIT_S else 0


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"
