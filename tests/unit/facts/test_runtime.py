"""Runtime facts and verdicts: /dev/shm, ulimits and CPUs, read from this machine."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from torchrig.facts import runtime
from torchrig.facts.verdict import Verdict
from torchrig.shared.voice import GIB, KIB, MIB


@pytest.mark.parametrize(
    ("size", "verdict"),
    [
        (64 * MIB, Verdict.FAIL),
        (512 * MIB, Verdict.WARN),
        (16 * GIB, Verdict.PASS),
        (None, Verdict.WARN),
    ],
)
def test_shm_sizes(size: int | None, verdict: Verdict) -> None:
    check = runtime.check_shm(size)
    assert check.verdict is verdict
    if verdict is not Verdict.PASS:
        assert "shm_size" in (check.fix or "")


def test_shm_at_dockers_64_mb_default_says_so() -> None:
    assert "Docker's default" in runtime.check_shm(64 * MIB).summary


def test_memlock_limited_warns_and_unlimited_passes() -> None:
    assert runtime.check_memlock(None).verdict is Verdict.PASS
    check = runtime.check_memlock(8 * MIB)
    assert check.verdict is Verdict.WARN
    assert "memlock=-1" in (check.fix or "")


@pytest.mark.parametrize(
    ("size", "verdict"), [(None, Verdict.PASS), (8 * MIB, Verdict.PASS), (1 * MIB, Verdict.WARN)]
)
def test_stack_limits(size: int | None, verdict: Verdict) -> None:
    assert runtime.check_stack(size).verdict is verdict


def facts(**overrides: object) -> runtime.RuntimeFacts:
    values: dict[str, object] = {
        "shm_bytes": GIB,
        "memlock_bytes": None,
        "stack_bytes": None,
        "cpu_count": 64,
        "usable_cpus": 64,
        "cpu_quota": None,
    }
    values.update(overrides)
    return runtime.RuntimeFacts(**values)  # type: ignore[arg-type]


def test_too_few_cpus_per_gpu_warns_and_counts_the_cgroup_quota() -> None:
    assert runtime.check_cpus(facts(), gpu_count=8).verdict is Verdict.PASS
    check = runtime.check_cpus(facts(cpu_quota=4.0), gpu_count=8)
    assert check.verdict is Verdict.WARN
    assert check.summary.startswith("4 usable of 64 CPUs (cgroup quota 4)")
    assert runtime.check_cpus(facts(usable_cpus=2), gpu_count=0).verdict is Verdict.PASS


def test_cgroup_cpu_max_is_parsed(tmp_path: Path) -> None:
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("max 100000\n")
    assert runtime.cgroup_cpu_quota(cpu_max) is None
    cpu_max.write_text("250000 100000\n")
    assert runtime.cgroup_cpu_quota(cpu_max) == 2.5
    assert runtime.cgroup_cpu_quota(tmp_path / "missing") is None


def test_this_machines_runtime_facts_match_what_its_tools_say() -> None:
    found = runtime.read_runtime_facts()
    said = subprocess.run(
        ["sh", "-c", "nproc; ulimit -l; ulimit -s; df -k /dev/shm | tail -1"],
        capture_output=True, text=True, check=True,
    ).stdout.split("\n")  # fmt: skip
    assert found.usable_cpus == int(said[0])
    for facts_bytes, ulimit_kib in ((found.memlock_bytes, said[1]), (found.stack_bytes, said[2])):
        assert facts_bytes == (None if ulimit_kib == "unlimited" else int(ulimit_kib) * 1024)
    assert found.shm_bytes == int(said[3].split()[1]) * 1024


def test_a_summary_that_is_not_pass_names_its_subject() -> None:
    """The banner shows these summaries without the row's name: each must read on its own."""
    assert runtime.check_shm(None).summary.startswith("no /dev/shm")
    assert runtime.check_shm(64 * MIB).summary.startswith("/dev/shm is only 64 MiB")
    assert runtime.check_shm(512 * MIB).summary.startswith("/dev/shm is only 512 MiB")
    assert runtime.check_memlock(8 * MIB).summary.startswith("memlock is limited to 8 MiB")
    assert runtime.check_stack(1 * MIB).summary.startswith("stack is limited to 1 MiB")
    assert " CPUs " in runtime.check_cpus(facts(usable_cpus=2), gpu_count=8).summary


def test_limits_are_written_in_whole_mib_or_tenths_of_a_gib_and_small_ones_in_kib() -> None:
    assert runtime.size_text(None) == "unlimited"
    assert runtime.size_text(64 * MIB) == "64 MiB"
    assert runtime.size_text(int(15.6 * GIB)) == "15.6 GiB"
    # A classic memlock default: not "0 MiB".
    assert runtime.check_memlock(64 * KIB).summary.startswith("memlock is limited to 64 KiB")


def test_exactly_one_gib_of_shm_is_enough_and_one_byte_less_is_not() -> None:
    assert runtime.check_shm(GIB).verdict is Verdict.PASS
    assert runtime.check_shm(GIB - 1).verdict is Verdict.WARN
    assert runtime.check_shm(64 * MIB + 1).verdict is Verdict.WARN


def test_memlock_chosen_by_memlock_never_advises_the_unlimited_it_replaced() -> None:
    """MEMLOCK=8388608 is what a user sets when the engine refused -1 (`make up` says so): the
    row still warns, but its fix must not advise the value that failed."""
    check = runtime.check_memlock(8 * MIB, setting="8388608")
    assert check.verdict is Verdict.WARN
    assert "-1" not in (check.fix or "") and "MEMLOCK=8388608 chose this limit" in (check.fix or "")
