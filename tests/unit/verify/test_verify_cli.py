"""The command: input checking, exit codes, the no-GPU hint, the report's two renderings."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from typing import Any

import pytest
from torchrig.facts.nvml import NvmlSnapshot
from torchrig.facts.verdict import Check, Verdict
from torchrig.verify import cli, report, runner
from torchrig.verify.model import SCHEMA, Report
from torchrig.verify.runner import Options, UsageError, verify

from ..facts.fake_nvml import board, snapshot, snapshot_of
from . import fakes


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def run_with(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], readers: Any, *argv: str
) -> tuple[int, str, str]:
    monkeypatch.setattr(runner, "Readers", lambda: readers)
    code = cli.run(parse(*argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


NO_GPU = fakes.readers(
    nvml=NvmlSnapshot(error="NVML did not initialise: NVML Shared Library Not Found"),
    facts=fakes.torch_facts(0, cuda=None),
)


# --- input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "expected indices"),
        ("0,,1", "expected indices"),
        ("a", "'a' is not a GPU index"),
        ("-1", "'-1' is not a GPU index"),
        ("0,0", "listed twice"),
    ],
)
def test_malformed_gpu_lists_are_clear_errors(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        cli.parse_gpu_list(text)


def test_gpu_lists_parse() -> None:
    assert cli.parse_gpu_list(" 0, 3 ") == [0, 3]


@pytest.mark.parametrize("text", ["-5", "0", "nan", "inf", "soon"])
def test_bad_timeouts_are_clear_errors(text: str) -> None:
    with pytest.raises(ValueError, match="--timeout"):
        cli.parse_timeout(text)


def test_bad_input_exits_3_not_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_with(monkeypatch, capsys, fakes.readers(), "--timeout=-1")
    assert code == 3
    assert out == ""
    assert "torchrig verify: error: --timeout '-1': must be a positive number" in err


def test_naming_a_gpu_that_is_not_there_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    one_gpu = fakes.readers(nvml=snapshot(1), facts=fakes.torch_facts(1))
    code, _, err = run_with(monkeypatch, capsys, one_gpu, "--gpus", "7", "--quick")
    assert code == 3
    assert "--gpus 7: only 1 GPU(s) visible (valid: 0)" in err


def test_gpus_with_cpu_is_an_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_with(monkeypatch, capsys, fakes.readers(), "--cpu", "--gpus", "0")
    assert code == 3
    assert "cannot be combined" in err


# --- exit codes -------------------------------------------------------------------------------


def test_no_gpu_exits_2_with_the_container_hint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_with(monkeypatch, capsys, NO_GPU, "--quick")
    assert code == 2
    flat = " ".join(out.split())
    for words in (
        "NVIDIA Container Toolkit",
        "nvidia-ctk runtime configure --runtime=docker",
        "--gpus all",
        "deploy.resources.reservations.devices",
        "torchrig verify --cpu",
    ):
        assert words in flat


def test_no_gpu_in_json_mode_exits_2_and_carries_the_hint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_with(monkeypatch, capsys, NO_GPU, "--quick", "--json")
    assert code == 2
    document = json.loads(out)
    assert document["exit_code"] == 2
    assert document["no_gpu"] is True
    assert "nvidia-ctk" in document["hint"]
    assert "nvidia-ctk" in err


def test_a_healthy_machine_exits_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_with(monkeypatch, capsys, fakes.readers(), "--quick")
    assert code == 0, out
    assert "FAIL" not in out


def test_one_failing_check_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = board(8)
    data["gpus"][6]["ecc_volatile_uncorrected"] = 1
    sick = fakes.readers(nvml=snapshot_of(data))
    code, out, _ = run_with(monkeypatch, capsys, sick, "--quick")
    assert code == 1
    assert "GPU6: 1 volatile uncorrected ECC error(s)" in out


def test_nvml_seeing_gpus_that_torch_cannot_use_is_a_fail_not_no_gpu() -> None:
    facts = fakes.torch_facts(0, cuda=None)
    result = verify(Options(quick=True), fakes.readers(facts=facts))
    assert result.exit_code() == 1
    assert not result.no_gpu


def test_cpu_mode_never_exits_2_for_lack_of_a_gpu() -> None:
    result = verify(Options(quick=True, cpu=True), NO_GPU)
    assert result.exit_code() == 0
    assert not result.no_gpu


def test_selected_gpus_are_the_only_ones_checked() -> None:
    result = verify(Options(quick=True, gpus=[1, 2]), fakes.readers())
    names = [check.name for check in result.checks if check.section == "gpus"]
    assert "GPU1" in names and "GPU2" in names and "GPU0" not in names
    with pytest.raises(UsageError):
        verify(Options(quick=True, gpus=[8]), fakes.readers())


def test_quick_skips_probes_and_collectives() -> None:
    result = verify(Options(quick=True), fakes.readers())
    skipped = {check.section for check in result.checks if check.verdict is Verdict.SKIP}
    assert skipped == {"probes", "collectives"}


# --- rendering --------------------------------------------------------------------------------


def sample_report() -> Report:
    result = Report(mode="gpu", options={"quick": True})
    result.add(
        Check("software", "torch", Verdict.PASS, "torch 2.13.0"),
        Check("runtime", "/dev/shm", Verdict.FAIL, "64 MiB", "raise shm_size"),
    )
    return result


def test_the_json_document_has_every_check_and_the_schema() -> None:
    document = json.loads(report.render_json(sample_report()))
    assert document["schema"] == SCHEMA
    assert document["exit_code"] == 1
    assert document["summary"] == {"pass": 1, "warn": 0, "fail": 1, "skip": 0}
    assert document["checks"][1] == {
        "section": "runtime",
        "name": "/dev/shm",
        "verdict": "FAIL",
        "summary": "64 MiB",
        "fix": "raise shm_size",
        "data": {},
    }


def test_text_shows_the_fix_under_a_failing_row_without_colour() -> None:
    text = report.render_text(sample_report(), colour=False)
    assert "\033[" not in text
    assert "FAIL  /dev/shm" in text
    assert "fix: raise shm_size" in text
    assert text.splitlines()[-1] == "1 pass, 0 warn, 1 fail, 0 skipped in 0.0 s; exit 1"


def test_colour_only_on_a_terminal_and_never_with_no_color() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert report.use_colour(Terminal(), {})
    assert not report.use_colour(Terminal(), {"NO_COLOR": "1"})
    assert not report.use_colour(io.StringIO(), {})
    assert "\033[31mFAIL" in report.render_text(sample_report(), colour=True)


def test_the_all_reduce_sweep_is_printed_under_its_row() -> None:
    result = Report(mode="cpu", options={})
    sweep = [
        {"bytes": 4096, "time_us": 10.0, "algbw_gbps": 0.4, "busbw_gbps": 0.4, "correct": True}
    ]
    result.add(Check("collectives", "all-reduce", Verdict.PASS, "ok", data={"sweep": sweep}))
    text = report.render_text(result)
    assert "busbw GB/s" in text
    assert "4 KiB" in text


def test_a_check_that_is_not_pass_must_carry_a_fix() -> None:
    with pytest.raises(ValueError, match="needs a fix"):
        Check("runtime", "x", Verdict.WARN, "no fix given")


# --- for real, on this machine ----------------------------------------------------------------


def has_gpu() -> bool:
    from torchrig.facts.nvml import read_inventory

    inventory = read_inventory()
    return inventory.available and bool(inventory.gpus)


def test_plain_quick_run_without_a_gpu_exits_2_for_real() -> None:
    if has_gpu():
        pytest.skip("this machine has a GPU")
    result = subprocess.run(
        [sys.executable, "-m", "torchrig.verify", "--quick"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "nvidia-ctk runtime configure" in " ".join(result.stdout.split())


@pytest.mark.slow
def test_the_cpu_path_runs_for_real_and_prints_json() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "torchrig.verify", "--cpu", "--json", "--timeout", "240"],
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    document = json.loads(result.stdout)
    failures = [check for check in document["checks"] if check["verdict"] == "FAIL"]
    assert result.returncode == document["exit_code"] == (1 if failures else 0), failures
    checks = {(check["section"], check["name"]): check for check in document["checks"]}
    allreduce = checks[("collectives", "all-reduce")]
    assert allreduce["verdict"] == "PASS"
    assert allreduce["data"]["backend"] == "gloo"
    assert all(entry["correct"] for entry in allreduce["data"]["sweep"])
    for name in ("numerics", "amp", "torch.compile"):
        assert checks[("probes", name)]["verdict"] == "PASS", checks[("probes", name)]


def test_gpus_torch_sees_without_nvml_are_still_identified_and_health_is_skipped() -> None:
    missing = NvmlSnapshot(error="pynvml is not installed (pip install nvidia-ml-py)")
    result = verify(Options(quick=True), fakes.readers(nvml=missing, facts=fakes.torch_facts(2)))
    rows = {(check.section, check.name): check for check in result.checks}
    assert rows[("gpus", "GPU1")].summary == "NVIDIA H100 80GB HBM3, 80 GiB, sm_90"
    assert rows[("gpus", "health")].verdict is Verdict.SKIP
    assert rows[("gpus", "counts")].verdict is Verdict.WARN
    assert rows[("software", "driver")].verdict is Verdict.WARN
    assert not result.no_gpu
    assert result.exit_code() == 0


def test_the_topology_matrix_is_printed_under_its_row() -> None:
    text = report.render_text(verify(Options(quick=True, gpus=[0, 5]), fakes.readers()))
    lines = text.splitlines()
    header = next(index for index, line in enumerate(lines) if "topology" in line)
    assert lines[header + 1].split() == ["GPU0", "GPU5"]
    assert lines[header + 2].split() == ["GPU0", "X", "NV"]
    assert lines[header + 3].split() == ["GPU5", "NV", "X"]
