from __future__ import annotations

from pathlib import Path

import pytest

from tests.machines import apptainer_rules
from tests.machines.apptainer_rules import Call


def test_a_call_is_read_as_apptainer_reads_it() -> None:
    call = apptainer_rules.parse(
        ["exec", "--nv", "--bind", "/a,/b:/c", "--pwd", "/a", "x.sif", "python", "-m", "m"]
    )
    assert call == Call("exec", "x.sif", ["python", "-m", "m"], [("/a", "/a"), ("/b", "/c")], "/a")


def test_what_is_not_simulated_is_refused_by_name() -> None:
    with pytest.raises(SystemExit, match="option --fakeroot is not simulated"):
        apptainer_rules.parse(["exec", "--fakeroot", "x.sif", "true"])
    with pytest.raises(SystemExit, match="only exec and run are simulated, not 'build'"):
        apptainer_rules.parse(["build", "x.sif", "docker-daemon://i"])


def test_exec_skips_the_entrypoint_and_run_keeps_it_under_the_same_rules(tmp_path: Path) -> None:
    binds = [(str(tmp_path), "/data")]
    exec_argv = apptainer_rules.docker_argv(
        Call("exec", "x.sif", ["python", "-V"], binds, "/data"), "img", 4242, 4243, "/home/u"
    )
    for rule in (["--read-only"], ["--user", "4242:4243"], ["--network", "host"],
                 ["--volume", "/home/u:/home/u"], ["--env", "HOME=/home/u"],
                 ["--volume", f"{tmp_path}:/data"], ["--workdir", "/data"]):  # fmt: skip
        assert any(exec_argv[i : i + len(rule)] == rule for i in range(len(exec_argv))), rule
    assert exec_argv[-4:] == ["--entrypoint", "python", "img", "-V"]
    run_argv = apptainer_rules.docker_argv(Call("run", "x.sif", []), "img", 4242, 4243, "/home/u")
    assert run_argv[-1] == "img" and "--entrypoint" not in run_argv


def test_the_callers_variables_pass_but_those_the_image_sets() -> None:
    environ = {"PATH": "/usr/bin", "HOME": "/h", "SLURM_JOB_ID": "7", "VIRTUAL_ENV": "/v"}
    assert apptainer_rules.passed_environment(environ, {"VIRTUAL_ENV"}) == ["SLURM_JOB_ID"]


def test_a_sif_stand_in_names_its_docker_image(tmp_path: Path) -> None:
    sif = apptainer_rules.sif_file(tmp_path / "t.sif", "torchrig/workstation:latest")
    assert apptainer_rules.docker_image_of(str(sif)) == "torchrig/workstation:latest"
    (tmp_path / "real.sif").write_bytes(b"\x7fELF")
    with pytest.raises(SystemExit, match=r"is not a \.sif stand-in"):
        apptainer_rules.docker_image_of(str(tmp_path / "real.sif"))
