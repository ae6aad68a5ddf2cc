"""The `torchrig launch` command: argument errors, --dry-run, and becoming torchrun."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from torchrig.cli import main
from torchrig.distributed import TIMEOUT_ENV
from torchrig.launch import cli, plan
from torchrig.launch.options import request_from_args
from torchrig.launch.plan import LaunchRequest

from .test_plan import eight_gpus, parse


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
    monkeypatch.setattr(cli.child, "run_torchrun", lambda *a: pytest.fail("dry run executed"))
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
    result = cli.child.TorchrunResult(75, stopped=True)
    monkeypatch.setattr(cli.child, "run_torchrun", lambda *a: calls.append(a) or result)
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
    result = cli.child.TorchrunResult(status, stopped=stopped)
    monkeypatch.setattr(cli.child, "run_torchrun", lambda *a: result)
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
