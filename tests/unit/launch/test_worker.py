"""The worker guard: real guard processes around small scripts, as torchrun would start them
(`torchrig-worker -u script.py ...` with a worker's environment), no torch needed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from torchrig.launch import worker
from torchrig.launch.worker import (
    GuardExit,
    ScriptReport,
    Target,
    judge,
    parse_report,
    parse_target,
)

GUARD = [sys.executable, "-c", worker.START_GUARD]

# Finishes, leaves a file open with unwritten data, then dies in Python's teardown on purpose:
# the module-level object's __del__ aborts the process when the interpreter clears __main__,
# which it does in the order the names were made: before the file would be closed.
DIES_IN_TEARDOWN = """
import os, sys
class DiesInTeardown:
    def __del__(self):
        os.abort()
keep = DiesInTeardown()
results = open(sys.argv[1], "w")
results.write("the results\\n")  # buffered: written by a flush, never by this script
raise SystemExit(int(sys.argv[2]))
"""


def worker_environ(tmp_path: Path, restart: int = 0, local_rank: int = 0, **extra: str):
    """What torchrun gives a worker, with its error file in torchrun's log layout."""
    rank_dir = tmp_path / "run_1" / f"attempt_{restart}" / str(local_rank)
    rank_dir.mkdir(parents=True, exist_ok=True)
    environ = {
        key: value
        for key, value in os.environ.items()
        if key != worker.GUARD_ENV and not key.startswith("TORCHELASTIC_")
    }
    return {
        **environ,
        "TORCHELASTIC_RUN_ID": "job-1",
        "TORCHELASTIC_RESTART_COUNT": str(restart),
        "TORCHELASTIC_MAX_RESTARTS": "3",
        "TORCHELASTIC_ERROR_FILE": str(rank_dir / "error.json"),
        "RANK": str(local_rank),
        "LOCAL_RANK": str(local_rank),
        **extra,
    }


def run_guard(tmp_path: Path, source: str, *args: str, environ=None, module: bool = False):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    target = ["-m", "script"] if module else [str(script)]
    return subprocess.run(
        [*GUARD, "-u", *target, *args],
        env=environ or worker_environ(tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


# --- decisions (pure) -----------------------------------------------------------------------------


def test_torchruns_worker_command_lines_are_recognised() -> None:
    assert parse_target(["-u", "t.py", "-x"]) == Target(("-u",), False, "t.py", ("-x",))
    module = Target(("-u",), True, "pkg.train", ("a",))
    assert parse_target(["-u", "-m", "pkg.train", "a"]) == module
    for other in ([], ["-u"], ["-c", "print(1)"], ["-u", "-m"], ["-X", "dev", "t.py"]):
        assert parse_target(other) is None


def test_only_a_death_after_the_script_finished_is_forgiven() -> None:
    finished = ScriptReport(status=0)
    assert judge(finished, -6, "1").code == 0 and "SIGABRT" in (judge(finished, -6, "1").line or "")
    assert judge(ScriptReport(status=3), -11, "0").code == 3  # sys.exit(3), then a crash: still 3
    assert judge(finished, 0, "1") == GuardExit(0)
    assert judge(ScriptReport(status=75), 75, "1") == GuardExit(75)
    assert judge(None, -9, "1") == GuardExit(-9)  # killed before its script returned
    assert judge(ScriptReport(error="RuntimeError: x"), 1, "1") == GuardExit(1)
    assert judge(finished, 5, "1") == GuardExit(5)  # an exit status of Python's own stands


def test_the_last_report_line_counts_and_junk_is_no_report() -> None:
    assert parse_report(b'{"status": 0}\n') == ScriptReport(status=0)
    assert parse_report(b'{"error": "ValueError: v"}\n') == ScriptReport(error="ValueError: v")
    assert parse_report(b"") is None and parse_report(b"garbage\n") is None


def test_the_guard_is_skipped_outside_torchrun_and_when_turned_off() -> None:
    assert worker.should_guard({"TORCHELASTIC_RUN_ID": "r"})
    assert not worker.should_guard({})
    assert not worker.should_guard({"TORCHELASTIC_RUN_ID": "r", worker.GUARD_ENV: "r"})
    assert not worker.should_guard({"TORCHELASTIC_RUN_ID": "r", worker.GUARD_ENV: "off"})
    # A torchrun started inside a guarded job guards its own workers.
    assert worker.should_guard({"TORCHELASTIC_RUN_ID": "inner", worker.GUARD_ENV: "outer"})


# --- the guard, for real --------------------------------------------------------------------------


def test_a_finished_script_that_dies_in_teardown_exits_0_with_its_files_flushed(
    tmp_path: Path,
) -> None:
    results = tmp_path / "results.txt"
    plain = subprocess.run([sys.executable, "-c", DIES_IN_TEARDOWN, str(results), "0"])
    assert plain.returncode == -signal.SIGABRT  # what the guard is for
    assert results.read_text() == ""  # and the script's data was lost
    guarded = run_guard(tmp_path, DIES_IN_TEARDOWN, str(results), "0")
    assert guarded.returncode == 0, guarded.stderr
    assert results.read_text() == "the results\n"
    lines = [line for line in guarded.stderr.splitlines() if line.startswith("[torchrig]")]
    assert lines == [
        "[torchrig] rank 0: the script finished (exit 0), then Python's teardown died of SIGABRT;"
        " that does not fail the job: the rank exits 0 and nothing runs again"
    ]


def test_the_scripts_own_exit_status_survives_a_teardown_death(tmp_path: Path) -> None:
    guarded = run_guard(tmp_path, DIES_IN_TEARDOWN, str(tmp_path / "r.txt"), "3")
    assert guarded.returncode == 3


@pytest.mark.parametrize(
    ("source", "code"),
    [
        ("pass", 0),
        ("import sys; sys.exit(3)", 3),
        ("raise SystemExit('bye')", 1),
        ("exit(4)", 4),
    ],
)
def test_exit_statuses_are_pythons(tmp_path: Path, source: str, code: int) -> None:
    assert run_guard(tmp_path, source).returncode == code
    plain = subprocess.run([sys.executable, "-c", source], capture_output=True)
    assert plain.returncode == code


def test_an_exception_fails_with_pythons_traceback_and_leaves_the_cause(tmp_path: Path) -> None:
    guarded = run_guard(tmp_path, "def train():\n    raise RuntimeError('boom')\ntrain()\n")
    assert guarded.returncode == 1
    lines = guarded.stderr.splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert 'script.py", line 3, in <module>' in lines[1]  # the script's frame first, ours hidden
    assert lines[-1] == "RuntimeError: boom"
    note = tmp_path / "run_1" / "attempt_0" / "0" / worker.CAUSE_NOTE
    assert json.loads(note.read_text()) == {"rank": "0", "cause": "raised RuntimeError: boom"}


def test_a_script_killed_before_it_returned_dies_the_same_way(tmp_path: Path) -> None:
    guarded = run_guard(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert guarded.returncode == -signal.SIGKILL
    note = tmp_path / "run_1" / "attempt_0" / "0" / worker.CAUSE_NOTE
    assert json.loads(note.read_text())["cause"] == "died of SIGKILL"


def test_the_script_sees_what_python_would_give_it(tmp_path: Path) -> None:
    probe = """
    import json, sys, __main__
    print(json.dumps({"name": __name__, "argv": sys.argv, "path0": sys.path[0],
                      "file": __file__, "main": __main__.__dict__ is globals()}))
    """
    guarded = run_guard(tmp_path, probe, "--lr", "0.1")
    assert guarded.returncode == 0, guarded.stderr
    script = tmp_path / "script.py"
    plain = subprocess.run(
        [sys.executable, "-u", str(script), "--lr", "0.1"], capture_output=True, text=True
    )
    assert json.loads(guarded.stdout) == json.loads(plain.stdout)


def test_a_module_runs_as_with_python_dash_m(tmp_path: Path) -> None:
    probe = "import sys\nprint(__name__, sys.argv[1:], sys.path[0])\n"
    guarded = run_guard(tmp_path, probe, "x", module=True)
    assert guarded.returncode == 0, guarded.stderr
    assert guarded.stdout.split() == ["__main__", "['x']", str(tmp_path)]


def test_a_missing_script_is_pythons_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.py"
    guarded = subprocess.run(
        [*GUARD, "-u", str(missing)], env=worker_environ(tmp_path), capture_output=True, text=True
    )
    assert guarded.returncode == 2
    assert f"can't open file '{missing}'" in guarded.stderr


def test_any_other_command_line_runs_as_plain_python(tmp_path: Path) -> None:
    passed = subprocess.run(
        [*GUARD, "-c", "import sys; print(sys.argv[1:])", "a"],
        env=worker_environ(tmp_path),
        capture_output=True,
        text=True,
    )
    assert passed.returncode == 0 and passed.stdout.strip() == "['a']"


def test_a_restart_round_names_itself_and_the_rank_that_died_before(tmp_path: Path) -> None:
    failed = run_guard(
        tmp_path, "import sys; sys.exit(3)", environ=worker_environ(tmp_path, 0, local_rank=1)
    )
    assert failed.returncode == 3
    again = run_guard(tmp_path, "pass", environ=worker_environ(tmp_path, 1, local_rank=0))
    assert again.returncode == 0
    assert "[torchrig] restart round 1 of 3 (rank 1 exited 3): the script starts again" in (
        again.stderr.splitlines()
    )
    other_rank = run_guard(tmp_path, "pass", environ=worker_environ(tmp_path, 1, local_rank=1))
    assert "restart round" not in other_rank.stderr  # one line per node and round


# In the guard's process only: a SIGTERM to itself while Python clears its modules at exit, as
# torchrun's signal to the job's other workers lands when it comes late. By then the teardown
# has put the signal's default action back.
SIGTERM_IN_GUARDS_TEARDOWN = """
import os, signal, sys
if any("torchrig.launch.worker" in arg for arg in sys.orig_argv):
    class LandsInTeardown:
        def __del__(self, kill=os.kill, pid=os.getpid(), sigterm=signal.SIGTERM):
            kill(pid, sigterm)
    keep = LandsInTeardown()
"""


def test_the_guard_ends_without_a_teardown_a_stop_signal_could_land_in(tmp_path: Path) -> None:
    """Every rank stopped resumably (75), torchrun signals the workers that have not exited yet:
    a guard that is already on its way out keeps the script's status, whenever the signal lands."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SIGTERM_IN_GUARDS_TEARDOWN)
    environ = {**worker_environ(tmp_path), "PYTHONPATH": str(site)}
    stopped = run_guard(tmp_path, "import sys; sys.exit(75)", environ=environ)
    assert stopped.returncode == 75, stopped.stderr


def test_a_stopped_rank_leaves_no_cause_and_keeps_its_resumable_status(tmp_path: Path) -> None:
    """torchrun signals the worker's process group: the script saves and exits 75, the guard
    waits for it and exits 75 too, and does not count the rank as a cause of failure."""
    source = """
    import signal, sys, time
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(75))
    print("ready", flush=True)
    time.sleep(60)
    """
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    guard = subprocess.Popen(
        [*GUARD, "-u", str(script)],
        env=worker_environ(tmp_path),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # as torchrun starts its workers
    )
    assert guard.stdout is not None and guard.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    os.killpg(guard.pid, signal.SIGTERM)
    assert guard.wait(timeout=30) == 75
    assert not list(tmp_path.glob(f"run_1/attempt_0/*/{worker.CAUSE_NOTE}"))


def test_a_worker_started_as_plain_python_becomes_the_guard(tmp_path: Path) -> None:
    """What the image's .pth file does at every start: torchrun's `python -u script.py` turns
    into the guard (same pid), whose child runs the script once."""
    script = tmp_path / "script.py"
    results = tmp_path / "results.txt"
    script.write_text(
        "from torchrig.launch.worker import take_over_if_worker\n"
        "take_over_if_worker()\n" + textwrap.dedent(DIES_IN_TEARDOWN)
    )
    taken = subprocess.run(
        [sys.executable, "-u", str(script), str(results), "0"],
        env=worker_environ(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert taken.returncode == 0, taken.stderr
    assert results.read_text() == "the results\n"
    assert "Python's teardown died of SIGABRT" in taken.stderr


@pytest.mark.parametrize("safe_path", ["", "1"])
def test_the_guard_drops_the_working_directory_and_nothing_else_from_sys_path(
    safe_path: str, tmp_path: Path
) -> None:
    env = {**os.environ, "PYTHONSAFEPATH": safe_path}
    show = "; print(sys.path)"
    run = [sys.executable, "-c", f"{worker.DROP_WORKING_DIRECTORY}{show}"]
    safe = [sys.executable, "-P", "-c", f"import sys{show}"]
    dropped, expected = (
        subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
        for argv in (run, safe)
    )
    assert dropped.stdout == expected.stdout
