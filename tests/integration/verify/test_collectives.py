"""The all-reduce probe for real: a gloo run between processes, and hung or crashing ranks (and
their children) turned into FAILs and killed."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from torchrig.facts import children
from torchrig.facts.children import module_command
from torchrig.facts.verdict import Verdict
from torchrig.shared.voice import MIB
from torchrig.verify import collectives

pytestmark = pytest.mark.slow


def test_a_real_gloo_all_reduce_is_correct_and_measured() -> None:
    pytest.importorskip("torch.distributed")
    small = collectives.Plan("gloo", [], 2, (4096, 256 * 1024), timeout=120)
    check = collectives.run_allreduce(small)
    assert check.verdict is Verdict.PASS, check
    sweep = check.data["sweep"]
    assert [item["bytes"] for item in sweep] == [4096, 256 * 1024]
    for item in sweep:
        assert item["correct"]
        assert item["algbw_gbps"] > 0
        assert item["busbw_gbps"] == pytest.approx(item["algbw_gbps"])  # 2(n-1)/n = 1 for n=2


FAKE_WORKER = """
import os, subprocess, sys, time
rank = int(next(arg for arg in sys.argv if arg.startswith("--rank=")).split("=")[1])
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
with open(os.path.join({folder!r}, f"pids-{{rank}}"), "w") as handle:
    handle.write(f"{{os.getpid()}} {{child.pid}}")
if {crash_rank} == rank:
    print("boom: rank failed on purpose", file=sys.stderr)
    sys.exit(3)
time.sleep(120)
"""


def fake_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash_rank: int) -> str:
    source = FAKE_WORKER.format(folder=str(tmp_path), crash_rank=crash_rank)
    (tmp_path / "fake_rank.py").write_text(textwrap.dedent(source))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    return "fake_rank"


def assert_all_gone(tmp_path: Path) -> None:
    for pids in tmp_path.glob("pids-*"):
        for pid in map(int, pids.read_text().split()):
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and process_exists(pid):
                time.sleep(0.05)
            assert not process_exists(pid), f"process {pid} survived"


def process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0): count it as gone once it has exited.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_a_hang_becomes_a_fail_and_every_rank_and_child_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch.distributed")
    module = fake_worker(tmp_path, monkeypatch, crash_rank=-1)
    hung = collectives.Plan("nccl", [0, 1], 2, (MIB,), timeout=4)
    begin = time.monotonic()
    check = collectives.run_allreduce(hung, module=module)
    assert time.monotonic() - begin < 60
    assert check.verdict is Verdict.FAIL
    assert "not finished after 4 s, ranks killed" in check.summary
    assert len(list(tmp_path.glob("pids-*"))) == 2
    assert_all_gone(tmp_path)


def test_a_crashing_rank_fails_fast_with_its_error_and_its_peers_are_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch.distributed")
    monkeypatch.setattr(children, "PEER_GRACE_S", 0.5)
    module = fake_worker(tmp_path, monkeypatch, crash_rank=0)
    check = collectives.run_allreduce(
        collectives.Plan("gloo", [], 2, (MIB,), timeout=90), module=module
    )
    assert check.verdict is Verdict.FAIL
    assert "rank 0 exited 3: boom: rank failed on purpose" in check.summary
    assert_all_gone(tmp_path)


def test_ctrl_c_while_waiting_kills_the_helpers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = fake_worker(tmp_path, monkeypatch, crash_rank=-1)
    helpers = [
        children.start(module_command(sys.executable, module, f"--rank={rank}"))
        for rank in range(2)
    ]
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob("pids-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(children.time, "sleep", interrupted)
    with pytest.raises(KeyboardInterrupt):
        children.wait_all(helpers, timeout=60)
    monkeypatch.undo()
    assert_all_gone(tmp_path)


def test_the_worker_joins_torchruns_group_without_a_parent() -> None:
    """As `torchrig launch --hostfile` runs it: a torchrun per host, no --rank/--store."""
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        "-m", "torchrig.verify.allreduce_worker", "--backend", "gloo", "--sizes", "4096",
        "--timeout", "120",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    answer = children.last_json_object(result.stdout, required_key="sweep")
    assert answer is not None and answer["world"] == 2, result.stdout
    assert answer["sweep"][0]["correct"]


def test_ranks_that_sigkill_cannot_end_do_not_hold_the_verdict_past_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process stuck in the kernel (a wedged GPU driver: D state) outlives SIGKILL; waiting to
    reap it would hang `torchrig verify` past --timeout. Here the kill is made ineffective, which
    is what such a process looks like from user space."""
    pytest.importorskip("torch.distributed")
    module = fake_worker(tmp_path, monkeypatch, crash_rank=-1)
    groups: list[int] = []
    monkeypatch.setattr(children.os, "killpg", lambda pgid, signum: groups.append(pgid))
    timeout = 3.0
    begin = time.monotonic()
    try:
        check = collectives.run_allreduce(
            collectives.Plan("gloo", [], 2, (MIB,), timeout=timeout), module=module
        )
        elapsed = time.monotonic() - begin
    finally:
        monkeypatch.undo()
        for pgid in set(groups):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
    # The deadline, the reap grace, and start-up on a loaded machine; the fake ranks would
    # otherwise sleep for 120 s.
    assert elapsed < timeout + children.REAP_GRACE_S + 30, f"took {elapsed:.1f} s"
    assert check.verdict is Verdict.FAIL
    assert "rank 0, rank 1 still alive after SIGKILL" in check.summary
    assert_all_gone(tmp_path)
