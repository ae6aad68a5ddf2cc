"""The command: input checking, exit codes and the no-GPU hint, through `cli.run`."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

import pytest
from torchrig.facts.nvml import NvmlSnapshot
from torchrig.verify import cli, runner

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


def test_in_a_cpu_only_container_plain_verify_checks_without_gpus_and_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TORCHRIG_CPU_ONLY", "1")  # as docker-compose.cpu.yml sets it
    code, out, err = run_with(monkeypatch, capsys, NO_GPU, "--quick", "--json")
    assert code == 0, out + err
    assert json.loads(out)["mode"] == "cpu"
    assert "CPU-only mode (TORCHRIG_CPU_ONLY=1)" in err
    assert "torchrig verify --cpu" in err


def test_naming_gpus_in_a_cpu_only_container_still_checks_them(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TORCHRIG_CPU_ONLY", "1")
    code, out, err = run_with(monkeypatch, capsys, NO_GPU, "--quick", "--gpus", "0")
    assert code == 2, out + err
    assert "CPU-only mode" not in err


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


def has_gpu() -> bool:
    from torchrig.facts.nvml import read_inventory

    inventory = read_inventory()
    return inventory.available and bool(inventory.gpus)


def test_plain_quick_run_without_a_gpu_exits_2_for_real() -> None:
    if has_gpu():
        pytest.skip("this machine has a GPU")
    result = subprocess.run(
        [sys.executable, "-m", "torchrig", "verify", "--quick"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "nvidia-ctk runtime configure" in " ".join(result.stdout.split())
