"""torchrig.pth.rank_exit: a rank ends with its script's status, not with an abort in Python's
teardown; what the teardown does for the user (threads, atexit, open files) still happens. Real
interpreters, no torch: the abort is a destructor that calls os.abort, every time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from torchrig.pth import rank_exit

from testbed.image_hook import with_image_hook

RUNNER = [sys.executable, "-u", "-P", "-c", rank_exit.RUN]

# A script that finishes, then would die in the teardown; meanwhile a thread works on, an atexit
# function is registered and a file is left open with its line still in the buffer.
FINISHES_THEN_ABORTS = """
import atexit, os, sys, threading, time

class DiesInTeardown:
    def __del__(self, abort=os.abort):
        abort()

dies = DiesInTeardown()
left_open = open(sys.argv[1] + "/left-open.txt", "w")
left_open.write("buffered\\n")

def late_writer():
    time.sleep(0.3)
    with open(sys.argv[1] + "/thread.txt", "w") as out:
        out.write("the thread finished\\n")

threading.Thread(target=late_writer).start()
atexit.register(lambda: print("atexit ran", flush=True))
print("pid", os.getpid(), "argv", sys.argv[1:], "name", __name__, "path0", sys.path[0])
"""


def write_script(tmp_path: Path, ending: str = "") -> Path:
    script = tmp_path / "train.py"
    script.write_text(FINISHES_THEN_ABORTS + textwrap.dedent(ending))
    return script


def run(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None):
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=60, check=False, env=env, cwd=cwd
    )


def test_a_finished_script_ends_with_its_status_and_what_the_teardown_does_for_the_user(
    tmp_path: Path,
) -> None:
    script = write_script(tmp_path)
    result = run([*RUNNER, str(script), str(tmp_path)], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"argv ['{tmp_path}'] name __main__ path0 {tmp_path}" in result.stdout
    assert result.stdout.splitlines()[-1] == "atexit ran"
    assert (tmp_path / "thread.txt").read_text() == "the thread finished\n"
    assert (tmp_path / "left-open.txt").read_text() == "buffered\n"


@pytest.mark.parametrize(
    ("ending", "status"),
    [
        ("sys.exit(3)", 3),
        ("sys.exit(None)", 0),
        ("sys.exit('bye')", 1),
        ("raise SystemExit(75)", 75),
    ],
)
def test_the_scripts_own_exit_status_is_kept(tmp_path: Path, ending: str, status: int) -> None:
    result = run([*RUNNER, str(write_script(tmp_path, ending)), str(tmp_path)])
    assert result.returncode == status, result.stderr
    assert (tmp_path / "left-open.txt").read_text() == "buffered\n"


@pytest.mark.parametrize("ending", ["", "import sys; sys.exit(0)"])
def test_what_the_script_leaves_lives_until_the_process_ends(tmp_path: Path, ending: str) -> None:
    """An object whose class is not the script's (no cycle through the script's globals keeps it)
    is not freed when the script ends: its destructor (here: an abort, like torch's) never runs."""
    (tmp_path / "dying.py").write_text(
        "import os\nclass DiesWhenFreed:\n    def __del__(self, abort=os.abort):\n        abort()\n"
    )
    script = tmp_path / "leaves.py"
    script.write_text(f"import dying\ndies = dying.DiesWhenFreed()\n{ending}\n")
    assert run([*RUNNER, str(script)]).returncode == 0


def test_an_exception_fails_with_1_and_its_traceback(tmp_path: Path) -> None:
    result = run(
        [*RUNNER, str(write_script(tmp_path, "raise RuntimeError('broken')")), str(tmp_path)]
    )
    assert result.returncode == 1
    assert "RuntimeError: broken" in result.stderr
    assert str(tmp_path / "train.py") in result.stderr  # the script's own frame is shown
    assert (tmp_path / "left-open.txt").read_text() == "buffered\n"


def test_a_missing_script_fails_as_python_says_it(tmp_path: Path) -> None:
    result = run([*RUNNER, "gone.py"], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        f"{sys.executable}: can't open file {str(tmp_path / 'gone.py')!r}: "
        "[Errno 2] No such file or directory\n"
    )


def test_a_keyboard_interrupt_ends_as_python_ends_it(tmp_path: Path) -> None:
    script = tmp_path / "interrupted.py"
    script.write_text("raise KeyboardInterrupt\n")
    assert run([*RUNNER, str(script)]).returncode == -signal.SIGINT


def test_a_module_runs_as_python_dash_m_would(tmp_path: Path) -> None:
    (tmp_path / "mytrain.py").write_text("import sys; print(__name__, sys.argv)\nsys.exit(4)\n")
    result = run([*RUNNER, "-m", "mytrain", "a"], cwd=tmp_path)
    assert result.returncode == 4, result.stderr
    assert result.stdout.strip() == f"__main__ ['{tmp_path / 'mytrain.py'}', 'a']"


def test_a_folder_named_torchrig_where_the_worker_starts_is_not_imported(tmp_path: Path) -> None:
    (tmp_path / "torchrig").mkdir()
    (tmp_path / "torchrig" / "__init__.py").write_text("raise SystemExit('the wrong torchrig')\n")
    script = tmp_path / "sub" / "train.py"
    script.parent.mkdir()
    script.write_text("print('ran')\n")
    result = run([*RUNNER, str(script)], cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "ran\n"), result.stderr


def worker_env(**extra: str) -> dict[str, str]:
    """A torchrun worker's environment, with the image's `.pth` hook."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC_", "TORCHRIG_"))}
    return with_image_hook(env) | {"TORCHELASTIC_RUN_ID": "job-1"} | extra


def test_the_hook_runs_a_torchrun_worker_in_its_own_process(tmp_path: Path) -> None:
    """`python -u train.py` as torchrun starts it: exec'd in place (the pid torchrun knows runs
    the script), and the teardown's abort does not fail it."""
    script = write_script(tmp_path)
    worker = subprocess.Popen(
        [sys.executable, "-u", str(script), str(tmp_path)],
        env=worker_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    stdout, stderr = worker.communicate(timeout=60)
    assert worker.returncode == 0, stderr
    assert f"pid {worker.pid} argv" in stdout
    assert "Warning" not in stderr, stderr  # nothing of the hook's in the script's output
    assert (tmp_path / "left-open.txt").read_text() == "buffered\n"


def test_with_the_switch_off_the_teardown_aborts_as_without_the_hook(tmp_path: Path) -> None:
    """Proof that the tests above provoke the abort they survive."""
    script = write_script(tmp_path)
    env = worker_env(TORCHRIG_RANK_EXIT="off")
    result = run([sys.executable, "-u", str(script), str(tmp_path)], env=env)
    assert result.returncode == -signal.SIGABRT
    assert (tmp_path / "left-open.txt").read_text() == ""  # its buffer died with it


def test_a_python_the_script_starts_is_not_taken_for_a_worker(tmp_path: Path) -> None:
    child = tmp_path / "child.py"
    child.write_text("import sys; print(sys.orig_argv[1:])\n")
    result = run([sys.executable, "-u", str(child)], env=worker_env(TORCHRIG_RANK_EXIT="job-1"))
    assert result.stdout.strip() == str(["-u", str(child)])


@pytest.mark.parametrize(
    ("args", "target"),
    [
        (["-u", "train.py", "--lr", "1"], ["train.py", "--lr", "1"]),
        (["-u", "-m", "pkg.train", "x"], ["-m", "pkg.train", "x"]),
        (["train.py"], None),  # not torchrun's shape: a script's own `python train.py`
        (["-u", "-c", "print(1)"], None),
        (["-u", "-m"], None),
        (["-u"], None),
    ],
)
def test_only_torchruns_worker_command_is_taken_over(args: list[str], target) -> None:
    assert rank_exit.worker_target(args) == target


def exits_with(code: object):
    def spawn_main() -> None:
        raise SystemExit(code)

    return spawn_main


@pytest.mark.parametrize(("code", "status"), [(0, 0), (1, 1), (None, 0), ("bad", 1)])
def test_a_spawned_child_that_used_torch_notes_multiprocessings_status(
    monkeypatch: pytest.MonkeyPatch, code: object, status: int
) -> None:
    monkeypatch.setattr(rank_exit, "_status", [])
    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch") or object())
    with pytest.raises(SystemExit):
        rank_exit.knows_its_status(exits_with(code))()
    assert rank_exit._status == [status]


def test_a_spawned_child_without_torch_ends_as_python_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(rank_exit, "_status", [])
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    with pytest.raises(SystemExit):
        rank_exit.knows_its_status(exits_with(3))()
    assert rank_exit._status == []


def test_local_rank_0_says_the_restart_round() -> None:
    env = {"TORCHELASTIC_RESTART_COUNT": "1", "TORCHELASTIC_MAX_RESTARTS": "3", "LOCAL_RANK": "0"}
    assert rank_exit.restart_round_line(env) == "restart round 1 of 3: the script starts again"
    assert rank_exit.restart_round_line(env | {"LOCAL_RANK": "1"}) is None
    assert rank_exit.restart_round_line(env | {"TORCHELASTIC_RESTART_COUNT": "0"}) is None


def test_the_switch() -> None:
    assert rank_exit.is_on({})
    assert rank_exit.is_on({"TORCHRIG_RANK_EXIT": "job-1"})
    assert not rank_exit.is_on({"TORCHRIG_RANK_EXIT": "off"})
    assert not rank_exit.is_on({"TORCHRIG_RANK_EXIT": "OFF"})


# --- torchrun's own end -------------------------------------------------------------------------


def test_torchrun_s_endings_are_one_line_and_other_errors_keep_their_traceback(
    tmp_path: Path,
) -> None:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    stop = SignalException("Process 1 got signal: 15", sigval=signal.SIGTERM)
    assert rank_exit.torchrun_ending(stop) == (
        "torchrun got SIGTERM and passed it on to its workers; their lines above say how each "
        "one ended"
    )
    # What torch's ErrorHandler records for an exception (rank_exit writes it as @record would).
    error_file = tmp_path / "error.json"
    error_file.write_text(
        '{"message": {"message": "RuntimeError: rank 2 failed on purpose\\nmore", '
        '"extraInfo": {"py_callstack": "Traceback ...", "timestamp": "1"}}}'
    )
    failures = {
        2: ProcessFailure(local_rank=0, pid=13, exitcode=1, error_file=str(error_file)),
        1: ProcessFailure(local_rank=1, pid=12, exitcode=-9, error_file="<N/A>"),
        0: ProcessFailure(local_rank=0, pid=11, exitcode=75, error_file="<N/A>"),
    }
    assert rank_exit.torchrun_ending(ChildFailedError("train.py", failures)) == (
        "torchrun: the job failed: rank 0 exited 75; rank 1 was killed by SIGKILL; rank 2 exited "
        "1 (RuntimeError: rank 2 failed on purpose) (the ranks' own lines above say more)"
    )
    assert rank_exit.torchrun_ending(RuntimeError("anything else")) is None


def test_under_plain_torchrun_a_stop_ends_without_a_traceback(tmp_path: Path) -> None:
    # torchrun's console script, in an interpreter with the image's hook: its SignalException
    # (raised here as the agent raises it) is one line, with torchrun's status (1) kept.
    torchrun = tmp_path / "torchrun"
    torchrun.write_text(
        "from torch.distributed.elastic.multiprocessing.api import SignalException\n"
        "import signal\n"
        "raise SignalException('Process 1 got signal: 15', sigval=signal.SIGTERM)\n"
    )
    result = subprocess.run(
        [sys.executable, str(torchrun)],
        env=with_image_hook(dict(os.environ)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr == (
        "[torchrig] torchrun got SIGTERM and passed it on to its workers; their lines above say "
        "how each one ended\n"
    )


# A rank killed while it writes its error file (torchrun SIGTERMs a rank the moment a peer fails,
# which may land mid-write): the write is made to fail half-way, every time, by a json.dump that
# writes half and then kills the process.
KILLED_MID_WRITE = """
import json, os, signal, sys
import torch
from torch.distributed.elastic.multiprocessing.errors import error_handler
from torchrig.pth import rank_exit

def half_then_killed(data, fp):
    fp.write(json.dumps(data)[:10])
    fp.flush()
    os.kill(os.getpid(), signal.SIGKILL)

error_handler.json.dump = half_then_killed
rank_exit.record_for_torchrun(RuntimeError("rank 0 failed"))
"""


def test_a_rank_killed_while_it_records_its_error_leaves_torchrun_no_half_file(
    tmp_path: Path,
) -> None:
    """torchrun's agent reads a dead rank's error file and crashes on a half-written one
    (JSONDecodeError, the whole job fails): the file is there whole or not at all."""
    error_file = tmp_path / "error.json"
    env = dict(os.environ) | {"TORCHELASTIC_ERROR_FILE": str(error_file)}
    result = subprocess.run(
        [sys.executable, "-c", KILLED_MID_WRITE], env=env, capture_output=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert not error_file.exists()


def test_a_recorded_error_is_the_file_torchrun_reads(tmp_path: Path) -> None:
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    error_file = tmp_path / "error.json"
    os.environ["TORCHELASTIC_ERROR_FILE"] = str(error_file)
    try:
        try:
            raise RuntimeError("rank 0 failed")
        except RuntimeError as exc:
            rank_exit.record_for_torchrun(exc)
    finally:
        del os.environ["TORCHELASTIC_ERROR_FILE"]
    failure = ProcessFailure(local_rank=0, pid=1, exitcode=1, error_file=str(error_file))
    assert failure.message["message"] == "RuntimeError: rank 0 failed"
    assert [p.name for p in tmp_path.iterdir()] == ["error.json"]  # nothing else left beside it
