"""A child of mp.spawn ends without Python's teardown once torch was used in it
(torchrig.launch.spawned); the rest of what the teardown does for the user still happens."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from torchrig.launch import spawned

SPAWNED_ARGV = [
    sys.executable, "-B", "-c",
    "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=4, pipe_handle=8)",
    "--multiprocessing-fork",
]  # fmt: skip


def test_only_a_child_of_multiprocessing_is_taken_over() -> None:
    assert spawned.is_spawned_child(SPAWNED_ARGV, {})
    assert not spawned.is_spawned_child([sys.executable, "-u", "train.py"], {})
    assert not spawned.is_spawned_child([sys.executable, "-c", "print(1)"], {})


def test_the_user_can_turn_it_off() -> None:
    assert not spawned.is_spawned_child(SPAWNED_ARGV, {"TORCHRIG_WORKER_GUARD": "off"})
    assert spawned.is_spawned_child(SPAWNED_ARGV, {"TORCHRIG_WORKER_GUARD": "job-7"})


def exits_with(code: object):
    def spawn_main() -> None:
        raise SystemExit(code)

    return spawn_main


@pytest.mark.parametrize(("code", "status"), [(0, 0), (1, 1), (None, 0), ("bad", 1)])
def test_with_torch_loaded_the_child_ends_now_with_multiprocessings_status(
    monkeypatch: pytest.MonkeyPatch, code: object, status: int
) -> None:
    ended: list[int] = []
    monkeypatch.setattr(spawned, "end_now", ended.append)
    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch") or object())
    spawned.ends_without_teardown(exits_with(code))()
    assert ended == [status]


def test_without_torch_the_child_ends_as_python_would(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spawned, "end_now", lambda status: pytest.fail("ended early"))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    with pytest.raises(SystemExit) as done:
        spawned.ends_without_teardown(exits_with(3))()
    assert done.value.code == 3


def test_ending_now_still_does_what_the_teardown_does_for_the_user(tmp_path: Path) -> None:
    """A thread still working is waited for, atexit functions run, a file left open is flushed,
    and the teardown itself never runs (here it would abort)."""
    program = textwrap.dedent(f"""
        import atexit, os, threading, time
        from torchrig.launch.spawned import end_now

        class DiesInTeardown:
            def __del__(self, abort=os.abort):
                abort()

        dies = DiesInTeardown()
        left_open = open({str(tmp_path / "left-open.txt")!r}, "w")
        left_open.write("buffered\\n")

        def late_writer():
            time.sleep(0.3)
            with open({str(tmp_path / "thread.txt")!r}, "w") as out:
                out.write("the thread finished\\n")

        threading.Thread(target=late_writer).start()
        atexit.register(lambda: print("atexit ran", flush=True))
        end_now(5)
    """)
    ended = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert ended.returncode == 5, ended.stderr
    assert ended.stdout == "atexit ran\n"
    assert (tmp_path / "left-open.txt").read_text() == "buffered\n"
    assert (tmp_path / "thread.txt").read_text() == "the thread finished\n"
