"""The all-reduce probe: verdicts on sweeps, a real gloo run, and hangs turned into FAILs."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest
from torchrig.facts.verdict import Verdict
from torchrig.verify import collectives, spawn

MIB = 1024**2


def entry(size: int, algbw: float, world: int, correct: bool = True) -> dict[str, object]:
    return {
        "bytes": size,
        "iterations": 8,
        "time_us": size / algbw / 1e3,
        "algbw_gbps": algbw,
        "busbw_gbps": algbw * 2 * (world - 1) / world,
        "correct": correct,
    }


def plan(backend: str = "nccl", world: int = 8, timeout: float = 30.0) -> collectives.Plan:
    return collectives.Plan(
        backend, list(range(world)) if backend == "nccl" else [], world, (MIB,), timeout
    )


def test_a_correct_fast_sweep_passes_and_reports_the_best_bus_bandwidth() -> None:
    sweep = [entry(MIB, 20.0, 8), entry(512 * MIB, 200.0, 8)]
    check = collectives.sweep_verdict(plan(), sweep, nvlink_everywhere=True)
    assert check.verdict is Verdict.PASS
    assert check.summary == "8 rank(s), nccl: correct; busbw 350.0 GB/s (algbw 200.0) at 512 MiB"


def test_wrong_sums_fail_naming_the_sizes() -> None:
    sweep = [entry(MIB, 20.0, 8), entry(512 * MIB, 200.0, 8, correct=False)]
    check = collectives.sweep_verdict(plan(), sweep, nvlink_everywhere=True)
    assert check.verdict is Verdict.FAIL
    assert "wrong sums at 512 MiB" in check.summary


def test_slow_bus_bandwidth_on_nvlink_warns() -> None:
    check = collectives.sweep_verdict(plan(), [entry(512 * MIB, 10.0, 8)], nvlink_everywhere=True)
    assert check.verdict is Verdict.WARN
    assert "under 50 GB/s for NVLink" in check.summary
    # The same figure is fine over PCIe.
    pcie = collectives.sweep_verdict(plan(), [entry(512 * MIB, 10.0, 8)], nvlink_everywhere=False)
    assert pcie.verdict is Verdict.PASS


def test_a_single_rank_reports_algorithm_bandwidth() -> None:
    check = collectives.sweep_verdict(plan(world=1), [entry(MIB, 5.0, 1)], False)
    assert check.verdict is Verdict.PASS
    assert "algbw 5.0 GB/s" in check.summary


def test_a_timed_out_run_fails_with_the_usual_fixes() -> None:
    outcomes = [spawn.Outcome(None, "", ""), spawn.Outcome(None, "", "")]
    check = collectives.allreduce_verdict(plan(world=2, timeout=7), outcomes, False)
    assert check.verdict is Verdict.FAIL
    assert "not finished after 7 s" in check.summary
    for words in ("NCCL_P2P_DISABLE=1", "ACS", "iommu=pt", "/dev/shm"):
        assert words in (check.fix or "")


def test_the_cpu_plan_uses_a_few_ranks() -> None:
    assert collectives.cpu_plan(30, cpu_count=2).world == 2
    assert collectives.cpu_plan(30, cpu_count=64).world == 4


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
    monkeypatch.setattr(spawn, "PEER_GRACE_S", 0.5)
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
    helpers = [spawn.start_module(module, [f"--rank={rank}"]) for rank in range(2)]
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob("pids-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(spawn.time, "sleep", interrupted)
    with pytest.raises(KeyboardInterrupt):
        spawn.wait_all(helpers, timeout=60)
    monkeypatch.undo()
    assert_all_gone(tmp_path)
