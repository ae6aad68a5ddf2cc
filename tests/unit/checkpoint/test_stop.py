"""Stop signals as "save now": what the handlers record, which signals they leave alone, and the
agreement without a process group. Several ranks: tests/integration/checkpoint/test_stop.py."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest
from torchrig.checkpoint import RESUMABLE_EXIT, StopSignals, ignore_stop_signals
from torchrig.checkpoint.stop import STOP_SIGNALS

SIGNALS = [getattr(signal, name) for name in STOP_SIGNALS]


@pytest.fixture(autouse=True)
def handlers_restored() -> Iterator[None]:
    """Every test leaves this process's signal handlers as it found them."""
    saved = {signum: signal.getsignal(signum) for signum in SIGNALS}
    # Under nohup (a CI runner may be one) SIGHUP starts out ignored, and StopSignals rightly
    # leaves an ignored signal alone. The tests start from a shell's usual state; those about
    # ignored signals set SIG_IGN themselves.
    for signum, handler in saved.items():
        if handler is signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_the_resumable_exit_code_is_ex_tempfail() -> None:
    assert RESUMABLE_EXIT == 75 == getattr(os, "EX_TEMPFAIL", 75)


@pytest.mark.parametrize("signum", SIGNALS, ids=STOP_SIGNALS)
def test_each_stop_signal_is_recorded_not_acted_on(signum: int) -> None:
    stop = StopSignals().install()
    assert stop.received is None and not stop.agreed()
    os.kill(os.getpid(), signum)  # delivered before kill() returns to Python code
    assert stop.received == signal.Signals(signum).name
    assert stop.agreed()  # no process group: this rank's own answer


def test_later_signals_keep_the_first_one() -> None:
    stop = StopSignals().install()
    os.kill(os.getpid(), signal.SIGUSR1)
    os.kill(os.getpid(), signal.SIGTERM)
    assert stop.received == "SIGUSR1"


def test_uninstall_puts_the_previous_handlers_back() -> None:
    def mine(signum: int, frame: object) -> None:
        pass

    signal.signal(signal.SIGUSR2, mine)
    stop = StopSignals().install()
    assert signal.getsignal(signal.SIGUSR2) == stop._record
    stop.uninstall()
    assert signal.getsignal(signal.SIGUSR2) is mine


def test_terminal_signals_ignored_at_start_stay_ignored() -> None:
    # nohup ignores SIGHUP, a shell's background job SIGINT: the user meant those.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stop = StopSignals().install()
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    # SIGTERM is how a container stop or a scheduler asks: always handled.
    assert signal.getsignal(signal.SIGTERM) == stop._record


def test_install_outside_the_main_thread_says_why_it_cannot() -> None:
    errors: list[BaseException] = []

    def install() -> None:
        try:
            StopSignals().install()
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=install)
    thread.start()
    thread.join()
    assert errors and "main thread" in str(errors[0])


def test_dataloader_workers_ignore_the_stop_signals() -> None:
    ignore_stop_signals(0)
    assert all(signal.getsignal(signum) is signal.SIG_IGN for signum in SIGNALS)


def test_a_stop_during_a_save_lets_the_save_finish_and_is_agreed_after(tmp_path) -> None:
    # The container stops (SIGTERM) while a periodic checkpoint is being written: the handler
    # only notes it, the checkpoint is complete and loadable, and the next boundary stops.
    import torch
    from torchrig.checkpoint import CheckpointManager, TrainingState

    class SignalsMidSave:
        def state_dict(self) -> dict:
            os.kill(os.getpid(), signal.SIGTERM)  # arrives while save() is running
            return {"epoch": 0}

        def load_state_dict(self, state: dict) -> None:
            pass

    manager = CheckpointManager(tmp_path)
    stop = StopSignals().install()
    try:
        manager.save(4, TrainingState(torch.nn.Linear(8, 8), sampler=SignalsMidSave()))
        assert stop.received == "SIGTERM"
        assert stop.agreed()
    finally:
        stop.uninstall()
    resumed = manager.load_latest(TrainingState(torch.nn.Linear(8, 8)))
    assert resumed is not None and resumed["step"] == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step_00000004.pt"]
