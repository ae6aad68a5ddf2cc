"""The `torchrig launch` command: argument errors, --dry-run, and torchrun as its child: launch's
exit status from torchrun's and the workers' notes, and for real: a stand-in torchrun gets
launch's stop signals and its workers' notes turn into 75."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from torchrig.checkpoint.stop import (
    RESUMABLE_NOTES_ENV,
    StopSignals,
    every_worker_stopped_resumably,
    launch_status,
    note_resumable_exit,
)
from torchrig.cli import main
from torchrig.launch import cli, plan
from torchrig.launch.options import LaunchRequest, request_from_args
from torchrig.train.distributed import TIMEOUT_ENV

from .test_plan import eight_gpus, parse

SCRIPTS = str(Path(cli.__file__).resolve().parents[2])


@pytest.mark.parametrize(
    "argv",
    [["--nproc-per-node", "0", "t.py"], ["--nproc-per-node", "two", "t.py"],
     ["--max-restarts", "-1", "t.py"], ["--threads", "0", "t.py"],
     ["--collective-timeout", "0", "t.py"], ["--bogus-flag", "t.py"]],
)  # fmt: skip
def test_bad_numbers_and_unknown_flags_are_argparse_errors(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse(*argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_missing_script_is_a_clear_error(tmp_path: Path, capsys) -> None:
    assert main(["launch", "--dry-run"]) == 2
    assert "no script given" in capsys.readouterr().err
    missing = tmp_path / "nope.py"
    assert main(["launch", "--dry-run", str(missing)]) == 2
    assert f"{missing}: no such file" in capsys.readouterr().err


def test_dry_run_prints_the_command_and_runs_nothing(tmp_path: Path, capsys, monkeypatch) -> None:
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('must not run')\n")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setattr(plan.nvml, "read_inventory", eight_gpus)
    monkeypatch.setattr(cli, "run_torchrun", lambda *a: pytest.fail("dry run executed"))
    assert main(["launch", "--dry-run", str(script), "--steps", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("+ ")
    assert f"--nproc-per-node 2 --max-restarts 0 {script} --steps 5" in out


def test_run_runs_torchrun_with_the_environment(tmp_path: Path, monkeypatch, capsys) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    calls = []
    result = cli.TorchrunResult(75, stopped=True)
    monkeypatch.setattr(cli, "run_torchrun", lambda *a: calls.append(a) or result)
    # launch's status is the child's decision (75: every worker stopped resumably).
    assert main(["launch", "--nproc-per-node", "2", str(script)]) == 75
    ((argv, env),) = calls
    assert argv[0] == sys.executable
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1" and TIMEOUT_ENV in env
    assert env["OMP_NUM_THREADS"] == str(max(1, (cli.os.cpu_count() or 1) // 2))
    assert "not restarted" not in capsys.readouterr().err  # a stop is not a failure


@pytest.mark.parametrize(
    ("args", "environ", "status", "stopped", "hint"),
    [
        ((), {}, 1, False, True),  # a failure under the default: say how to get restarts
        ((), {}, 0, False, False),
        ((), {}, 75, False, False),  # every rank stopped resumably
        ((), {}, 130, True, False),  # Ctrl-C
        (("--max-restarts", "0"), {}, 1, False, False),  # the user chose
        ((), {"PET_MAX_RESTARTS": "2"}, 1, False, False),  # a scheduler chose
    ],
)
def test_a_failure_under_the_default_says_it_was_not_restarted(
    tmp_path: Path, monkeypatch, capsys, args, environ, status, stopped, hint
) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    result = cli.TorchrunResult(status, stopped=stopped)
    monkeypatch.setattr(cli, "run_torchrun", lambda *a: result)
    assert main(["launch", "--nproc-per-node", "1", *args, str(script)]) == status
    err = capsys.readouterr().err
    assert ("not restarted" in err and "--max-restarts 3" in err) is hint


def test_request_keeps_script_arguments_verbatim() -> None:
    request = request_from_args(parse("t.py", "-x", "--", "y"))
    assert request == LaunchRequest(script="t.py", script_args=["-x", "--", "y"])


def test_a_multi_node_launch_by_hand_gets_c10d_and_the_rejoin_fix(tmp_path: Path, capsys) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    endpoint = "127.0.0.1:29400"  # this machine: no connection check needed
    assert main(["launch", "--dry-run", "--nnodes", "1:2", "--rdzv-endpoint", endpoint,
                 str(script)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 " in out
    assert "--rdzv-backend c10d " in out and "--standalone" not in out


def test_an_endpoint_that_does_not_resolve_stops_the_launch(tmp_path: Path, capsys) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    assert main(["launch", "--nnodes", "2", "--rdzv-endpoint", "nowhere.invalid:29400",
                 str(script)]) == 2  # fmt: skip
    assert "'nowhere.invalid' does not resolve on this machine" in capsys.readouterr().err


# --- torchrun as launch's child ------------------------------------------------------------


def test_every_local_rank_must_have_stopped_resumably() -> None:
    assert every_worker_stopped_resumably(["local-rank-0-of-2", "local-rank-1-of-2"])
    assert every_worker_stopped_resumably(["local-rank-0-of-1"])
    assert not every_worker_stopped_resumably([])
    assert not every_worker_stopped_resumably(["local-rank-1-of-2"])  # rank 0 failed
    assert not every_worker_stopped_resumably(["local-rank-0-of-2", "local-rank-1-of-3"])
    assert not every_worker_stopped_resumably(["local-rank-0-of-1", "stray"])


def test_exit_status_is_75_only_for_a_failed_torchrun_whose_workers_all_stopped() -> None:
    both = ["local-rank-0-of-2", "local-rank-1-of-2"]
    assert launch_status(1, both) == 75
    assert (
        launch_status(-signal.SIGTERM, both) == 75
    )  # torchrun died of the signal after they saved
    assert launch_status(0, both) == 0  # finished: the notes came from a restart round before
    assert launch_status(1, both[:1]) == 1
    assert launch_status(1, []) == 1
    assert launch_status(-signal.SIGKILL, []) == 128 + signal.SIGKILL


def test_a_note_names_the_local_rank_and_is_left_only_under_launch(tmp_path: Path) -> None:
    note_resumable_exit({"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})  # not launched: nothing
    note_resumable_exit(
        {RESUMABLE_NOTES_ENV: str(tmp_path), "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    )
    assert [p.name for p in tmp_path.iterdir()] == ["local-rank-1-of-2"]
    note_resumable_exit({RESUMABLE_NOTES_ENV: str(tmp_path / "gone")})  # never fails the exit


def test_a_restarted_worker_forgets_its_note_from_the_round_before(tmp_path: Path) -> None:
    # Round 0: both workers stopped resumably; torchrun restarted them (--max-restarts), and
    # round 1 fails without a stop. The old notes must not turn that failure into 75.
    for rank in ("0", "1"):
        note_resumable_exit(
            {RESUMABLE_NOTES_ENV: str(tmp_path), "LOCAL_RANK": rank, "LOCAL_WORLD_SIZE": "2"}
        )
    restarted = {RESUMABLE_NOTES_ENV: str(tmp_path), "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "3"}
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name, value in restarted.items():
                patch.setenv(name, value)
            StopSignals().install().uninstall()  # what a worker does at its start
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    assert [p.name for p in tmp_path.iterdir()] == ["local-rank-0-of-2"]
    assert launch_status(1, [p.name for p in tmp_path.iterdir()]) == 1


# A stand-in for torchrun: two "workers" (itself) that, on a stop signal, leave their notes and
# exit 1 as torchrun does; `up` shows its handlers are installed.
STAND_IN = textwrap.dedent(
    """
    import os, signal, sys, time
    from pathlib import Path
    from torchrig.checkpoint.stop import note_resumable_exit
    def stop(signum, frame):
        Path("got").write_text(signal.Signals(signum).name)
        if sys.argv[1] == "resumable":
            for rank in ("0", "1"):
                note_resumable_exit({**os.environ, "LOCAL_RANK": rank, "LOCAL_WORLD_SIZE": "2"})
        sys.exit(1)
    for name in ("SIGTERM", "SIGUSR1"):
        signal.signal(getattr(signal, name), stop)
    Path("up").touch()
    time.sleep(60)
    """
)

LAUNCHER = textwrap.dedent(
    """
    import os, sys
    from torchrig.launch import cli, torchrun
    torchrun.with_stop_signals_handled = lambda argv, supported=None: argv
    stand_in = [sys.executable, "-c", sys.argv[1], sys.argv[2]]
    sys.exit(cli.run_torchrun(stand_in, dict(os.environ)).status)
    """
)


def launch_stand_in(tmp_path: Path, mode: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": SCRIPTS}
    process = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, STAND_IN, mode], cwd=tmp_path, env=env
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "up").exists():
        assert process.poll() is None and time.monotonic() < deadline, "stand-in did not start"
        time.sleep(0.05)
    return process


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGUSR1])
def test_launch_passes_a_stop_on_and_exits_75_when_every_worker_stopped_resumably(
    tmp_path: Path, stop: signal.Signals
) -> None:
    process = launch_stand_in(tmp_path, "resumable")
    process.send_signal(stop)
    assert process.wait(timeout=60) == 75
    assert (tmp_path / "got").read_text() == stop.name


def test_launch_exits_with_torchrun_s_status_when_the_workers_did_not_stop_resumably(
    tmp_path: Path,
) -> None:
    process = launch_stand_in(tmp_path, "failed")
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 1
