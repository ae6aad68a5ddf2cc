"""The local plan: the torchrun command line `torchrig launch` builds, and its defaults."""

from __future__ import annotations

import argparse
import sys

import pytest
from torchrig.cli import build_parser
from torchrig.facts.nvml import NvmlSnapshot, read_inventory
from torchrig.launch import network
from torchrig.launch.network import Reach, Route
from torchrig.launch.options import LaunchError, request_from_args
from torchrig.launch.plan import (
    build_plan,
    check_rendezvous,
    choose_nproc,
    count_visible_gpus,
    exposure_here,
    multi_node_by_environment,
    pet_variable,
    set_by_environment,
)
from torchrig.launch.torchrun import TorchrunFlags
from torchrig.train.distributed import DEFAULT_TIMEOUT_S, TIMEOUT_ENV

from ..facts.fake_nvml import FakeNvml, board

STORE_FIX = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
# One machine: c10d with its state in a private file, the workers on loopback.
ONE_MACHINE = [
    "--rdzv-backend", "c10d", "--rdzv-conf", "store_type=file", "--local-addr", "127.0.0.1",
]  # fmt: skip
ON_LOOPBACK = {"GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}
NO_NVML = NvmlSnapshot(error="NVML did not initialise: NVML Shared Library Not Found")


def no_nvml() -> NvmlSnapshot:
    return NO_NVML


def eight_gpus() -> NvmlSnapshot:
    return read_inventory(FakeNvml(board(8)))


def parse(*argv: str) -> argparse.Namespace:
    return build_parser("launch").parse_args(["launch", *argv])


def plan_for(*argv: str, environ: dict[str, str] | None = None, gpus: int = 0, cpus: int = 8):
    request = request_from_args(parse(*argv))
    return build_plan(request, environ or {}, gpu_count=gpus, cpu_count=cpus)


def torchrun_part(argv: list[str]) -> list[str]:
    # -P: torchrun as installed, never a torch/ in the working directory (root in /workspace)
    assert argv[:4] == [sys.executable, "-P", "-m", "torch.distributed.run"]
    return argv[4:]


def test_defaults_on_one_gpu_machine() -> None:
    plan = plan_for("train.py", "--lr", "0.1", gpus=4, cpus=32)
    assert torchrun_part(plan.argv) == [
        *ONE_MACHINE, "--nproc-per-node", "4", "--max-restarts", "0", "train.py", "--lr", "0.1",
    ]  # fmt: skip
    assert plan.env_updates == {
        "OMP_NUM_THREADS": "8",
        STORE_FIX: "1",  # restart rounds re-form the group, on one machine too
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        TIMEOUT_ENV: str(DEFAULT_TIMEOUT_S),
        **ON_LOOPBACK,
    }


def test_cpu_only_machine_gets_a_few_processes() -> None:
    assert choose_nproc(None, gpu_count=0, cpu_count=2) == 2
    assert choose_nproc(None, gpu_count=0, cpu_count=64) == 4
    assert choose_nproc("cpu", gpu_count=8, cpu_count=1) == 1
    assert choose_nproc("gpu", gpu_count=8, cpu_count=1) == 8
    assert choose_nproc("3", gpu_count=8, cpu_count=1) == 3
    with pytest.raises(LaunchError, match="no GPU is visible"):
        choose_nproc("gpu", gpu_count=0, cpu_count=4)


def test_explicit_choices_win_over_defaults() -> None:
    plan = plan_for(
        "--nproc-per-node", "2", "--max_restarts", "0", "--threads", "3",
        "--collective-timeout", "45", "--tee", "3", "train.py",
        environ={"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0", "OMP_NUM_THREADS": "7", STORE_FIX: "0",
                 **ON_LOOPBACK},
        gpus=8,
    )  # fmt: skip
    assert torchrun_part(plan.argv) == [
        *ONE_MACHINE, "--nproc-per-node", "2", "--max-restarts", "0", "--tee", "3", "train.py",
    ]  # fmt: skip
    # The user's own environment is left alone; explicit flags are applied.
    assert plan.env_updates == {"OMP_NUM_THREADS": "3", TIMEOUT_ENV: "45"}


def test_environment_already_set_by_the_user_is_kept() -> None:
    env = {"OMP_NUM_THREADS": "5", TIMEOUT_ENV: "99", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
    assert plan_for("t.py", environ={**env, STORE_FIX: "1", **ON_LOOPBACK}).env_updates == {}


def test_multi_node_flags_drop_the_one_machine_rendezvous_and_pass_through_in_order() -> None:
    plan = plan_for(
        "--nnodes", "2", "--rdzv_backend", "c10d", "--rdzv-endpoint", "head:29400",
        "-m", "pkg.train", "--epochs", "3", gpus=8,
    )  # fmt: skip
    assert torchrun_part(plan.argv) == [
        "--nproc-per-node", "8", "--max-restarts", "0", "--nnodes", "2", "--rdzv-backend", "c10d",
        "--rdzv-endpoint", "head:29400", "--module", "pkg.train", "--epochs", "3",
    ]  # fmt: skip


def test_script_arguments_are_never_taken_for_launch_flags() -> None:
    plan = plan_for("train.py", "--max-restarts", "9", "--dry-run", "--nnodes", "4")
    tail = ["train.py", "--max-restarts", "9", "--dry-run", "--nnodes", "4"]
    assert torchrun_part(plan.argv)[-len(tail) :] == tail
    assert torchrun_part(plan.argv)[:6] == ONE_MACHINE  # --nnodes 4 belonged to the script


def test_one_machine_keeps_the_users_rendezvous_settings_and_its_state_in_a_file() -> None:
    plan = plan_for(
        "--rdzv-conf", "join_timeout=30,store_type=tcp", "--rdzv-backend", "c10d",
        "--local-addr", "127.0.0.2", "t.py",
    )  # fmt: skip
    assert torchrun_part(plan.argv) == [
        "--rdzv-conf", "join_timeout=30,store_type=file", "--nproc-per-node", "4",
        "--max-restarts", "0", "--rdzv-backend", "c10d", "--local-addr", "127.0.0.2", "t.py",
    ]  # fmt: skip
    conf = plan_for("t.py", environ={"PET_RDZV_CONF": "join_timeout=30"}).argv
    assert conf[conf.index("--rdzv-conf") + 1] == "join_timeout=30,store_type=file"


def test_another_backend_on_one_machine_is_the_users_choice() -> None:
    plan = plan_for("--rdzv-backend", "static", "--rdzv-conf", "rank=0", "t.py")
    assert torchrun_part(plan.argv) == [
        "--nproc-per-node", "4", "--max-restarts", "0", "--rdzv-backend", "static",
        "--rdzv-conf", "rank=0", "t.py",
    ]  # fmt: skip


def test_display_is_a_copyable_shell_line() -> None:
    environ = {"OMP_NUM_THREADS": "1", STORE_FIX: "1"}
    plan = plan_for("my script.py", "--name", "a b", environ=environ)
    shown = plan.display()
    assert shown.startswith("TORCH_NCCL_ASYNC_ERROR_HANDLING=1 ")
    assert "'my script.py' --name 'a b'" in shown


@pytest.mark.parametrize(
    ("value", "count"),
    [("0,1,2", 3), ("", 0), ("-1", 0), ("0,-1,2", 1), ("GPU-8a1b,GPU-77c2", 2), ("none", 0)],
)
def test_visible_gpus_from_cuda_visible_devices(value: str, count: int, tmp_path) -> None:
    # Without NVML each entry is judged by its form (CUDA's rules, torchrig.facts.visible).
    environ = {"CUDA_VISIBLE_DEVICES": value}
    assert count_visible_gpus(environ, no_nvml, driver_gpus=tmp_path) == count


def test_gpus_are_counted_by_nvml_through_cuda_visible_devices() -> None:
    assert count_visible_gpus({}, eight_gpus) == 8
    assert count_visible_gpus({"CUDA_VISIBLE_DEVICES": "5,2"}, eight_gpus) == 2
    # NVML knows there is no GPU 9, so CUDA would stop there: as verify expects it.
    assert count_visible_gpus({"CUDA_VISIBLE_DEVICES": "1,9,2"}, eight_gpus) == 1
    assert count_visible_gpus({"CUDA_VISIBLE_DEVICES": "1,9,2"}, no_nvml) == 3


def test_without_nvml_or_the_variable_the_driver_lists_the_gpus(tmp_path) -> None:
    for bus_id in ("0000:18:00.0", "0000:2a:00.0"):
        (tmp_path / bus_id).mkdir()
    assert count_visible_gpus({}, no_nvml, driver_gpus=tmp_path) == 2
    assert count_visible_gpus({}, eight_gpus, driver_gpus=tmp_path) == 8
    # No driver: no GPU.
    assert count_visible_gpus({}, no_nvml, driver_gpus=tmp_path / "absent") == 0


# --- more than one node ---------------------------------------------------------------------

ETH0 = Route("10.0.0.5", "eth0")


def multi_node_plan(*flags: str, environ: dict[str, str] | None = None, route=None):
    request = request_from_args(parse(*flags, "t.py"))
    return build_plan(request, environ or {}, gpu_count=0, cpu_count=4, route=route)


def test_an_endpoint_alone_gets_c10d_and_the_rejoin_fix() -> None:
    plan = multi_node_plan("--nnodes", "1:3", "--rdzv-endpoint", "head:29400")
    assert torchrun_part(plan.argv) == [
        "--nproc-per-node", "4", "--max-restarts", "0", "--rdzv-backend", "c10d",
        "--nnodes", "1:3", "--rdzv-endpoint", "head:29400", "t.py",
    ]  # fmt: skip
    assert plan.env_updates[STORE_FIX] == "1"


def test_the_route_to_the_endpoint_picks_the_address_and_the_interfaces() -> None:
    plan = multi_node_plan("--nnodes", "2", "--rdzv-endpoint", "head", route=ETH0)
    assert torchrun_part(plan.argv)[4:] == [
        "--rdzv-backend", "c10d", "--local-addr", "10.0.0.5",
        "--nnodes", "2", "--rdzv-endpoint", "head", "t.py",
    ]  # fmt: skip
    assert plan.env_updates["GLOO_SOCKET_IFNAME"] == "eth0"
    assert plan.env_updates["NCCL_SOCKET_IFNAME"] == "eth0"


def test_the_users_network_choices_win() -> None:
    environ = {"GLOO_SOCKET_IFNAME": "ib0", STORE_FIX: "0"}
    plan = multi_node_plan(
        "--rdzv-endpoint", "head", "--local-addr", "head-2.lan", "--rdzv-backend", "c10d",
        environ=environ, route=ETH0,
    )  # fmt: skip
    assert plan.argv.count("--local-addr") == 1 and "head-2.lan" in plan.argv
    assert plan.argv.count("--rdzv-backend") == 1
    assert "GLOO_SOCKET_IFNAME" not in plan.env_updates
    assert plan.env_updates["NCCL_SOCKET_IFNAME"] == "eth0"
    assert STORE_FIX not in plan.env_updates  # the user's 0 stays (to reproduce the bug)


def test_a_loopback_route_adds_nothing() -> None:
    plan = multi_node_plan("--rdzv-endpoint", "localhost:29400", route=Route("127.0.0.1", "lo"))
    assert "--local-addr" not in plan.argv
    assert "GLOO_SOCKET_IFNAME" not in plan.env_updates


def test_the_static_rendezvous_is_left_as_it_is() -> None:
    plan = multi_node_plan(
        "--nnodes", "2", "--node-rank", "1", "--master-addr", "head", "--rdzv-endpoint", "head"
    )
    assert "--rdzv-backend" not in plan.argv


def test_a_schedulers_c10d_gets_the_rejoin_fix() -> None:
    environ = {"PET_NNODES": "1:4", "PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "job-0:29400"}
    plan = multi_node_plan(environ=environ)
    assert plan.env_updates[STORE_FIX] == "1"
    assert "--rdzv-backend" not in plan.argv  # torchrun reads PET_RDZV_BACKEND itself


# --- a scheduler's PET_* variables: torchrun reads them; launch's defaults must not override them

# What Kubeflow's Trainer (TrainJob, v2) injects into every pod of a 2-node job.
TRAINJOB_POD = {
    "PET_NNODES": "2",
    "PET_NPROC_PER_NODE": "4",
    "PET_NODE_RANK": "1",
    "PET_MASTER_ADDR": "job-node-0-0.job",
    "PET_MASTER_PORT": "29500",
}


def test_variable_names_follow_torchruns_rule() -> None:
    assert pet_variable("--nproc-per-node") == "PET_NPROC_PER_NODE"
    assert pet_variable("--max-restarts") == "PET_MAX_RESTARTS"
    assert set_by_environment("--nnodes", {"PET_NNODES": " "}) is None


def test_a_trainjob_pod_leaves_the_job_shape_to_the_environment() -> None:
    plan = plan_for("train.py", environ=TRAINJOB_POD, gpus=8, cpus=16)
    # No --standalone (a second node is coming), and no --nproc-per-node that would beat the
    # operator's 4; OMP threads are still split by the operator's process count.
    assert torchrun_part(plan.argv) == ["--max-restarts", "0", "train.py"]
    assert plan.env_updates["OMP_NUM_THREADS"] == "4"


def test_explicit_flags_still_win_over_the_environment() -> None:
    plan = plan_for("--nproc-per-node", "2", "--max-restarts", "0", "t.py", environ=TRAINJOB_POD)
    assert torchrun_part(plan.argv) == ["--nproc-per-node", "2", "--max-restarts", "0", "t.py"]


def test_max_restarts_from_the_environment_is_left_to_torchrun() -> None:
    plan = plan_for("t.py", environ={"PET_MAX_RESTARTS": "7"}, gpus=1)
    assert torchrun_part(plan.argv) == [*ONE_MACHINE, "--nproc-per-node", "1", "t.py"]


@pytest.mark.parametrize(
    ("environ", "multi"),
    [({"PET_NNODES": "1"}, False), ({"PET_NNODES": "1:1"}, False), ({"PET_NNODES": "2"}, True),
     ({"PET_NNODES": "1:4"}, True), ({"PET_RDZV_ENDPOINT": "head:29400"}, True),
     ({"PET_MASTER_ADDR": "10.0.0.1"}, True), ({}, False)],
)  # fmt: skip
def test_multi_node_by_environment(environ: dict[str, str], multi: bool) -> None:
    assert multi_node_by_environment(environ) is multi


@pytest.mark.parametrize("value", ["0", "four", "-1", "2.5"])
def test_a_malformed_process_count_in_the_environment_is_named(value: str) -> None:
    with pytest.raises(LaunchError, match=f"PET_NPROC_PER_NODE='{value}'"):
        plan_for("t.py", environ={"PET_NPROC_PER_NODE": value})


def test_word_process_counts_from_the_environment_are_understood() -> None:
    plan = plan_for("t.py", environ={"PET_NPROC_PER_NODE": "gpu"}, gpus=2, cpus=8)
    assert plan.env_updates["OMP_NUM_THREADS"] == "4"
    assert "--nproc-per-node" not in plan.argv


# --- a multi-node launch by hand: the endpoint checked, the warning for a public address -----


def given(*argv: str) -> TorchrunFlags:
    """torchrun flags as `torchrig launch` reads them (LaunchError for a bad value)."""
    return request_from_args(parse(*argv, "t.py")).torchrun


# --- by hand, on one node -------------------------------------------------------------------


def test_no_endpoint_nothing_to_check() -> None:
    assert check_rendezvous(given("--nnodes", "2")) is None


def test_a_local_endpoint_gives_its_route() -> None:
    route = check_rendezvous(given("--rdzv-endpoint", "127.0.0.1:1"))
    assert route is not None and route.loopback


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [("no-such-host.invalid:29400", "'no-such-host.invalid' does not resolve on this machine"),
     ("head:port", "--rdzv-endpoint 'head:port': the port must be a number")],
)  # fmt: skip
def test_endpoints_that_cannot_work_are_refused(endpoint: str, message: str) -> None:
    with pytest.raises(LaunchError, match=message):
        check_rendezvous(given("--rdzv-endpoint", endpoint))


def test_an_endpoint_that_drops_connections_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(network, "route_to", lambda host: Route("10.0.0.5", "eth0"))
    monkeypatch.setattr(network, "resolve", lambda host: "10.0.0.1")
    monkeypatch.setattr(
        network, "reach", lambda endpoint, timeout: (Reach.UNREACHABLE, "no answer within 5 s")
    )
    with pytest.raises(LaunchError) as raised:
        check_rendezvous(given("--rdzv-endpoint", "head:29400"))
    assert str(raised.value).startswith(
        "cannot reach the rendezvous endpoint head:29400 (no answer within 5 s): a firewall "
        "dropping TCP port 29400? open it"
    )


def test_an_endpoint_that_refuses_is_waited_for_by_torchrun(monkeypatch) -> None:
    monkeypatch.setattr(network, "route_to", lambda host: Route("10.0.0.5", "eth0"))
    monkeypatch.setattr(network, "resolve", lambda host: "10.0.0.1")
    monkeypatch.setattr(network, "reach", lambda endpoint, timeout: (Reach.REFUSED, "refused"))
    assert check_rendezvous(given("--rdzv-endpoint", "head")) == Route("10.0.0.5", "eth0")


def test_this_machine_warns_of_its_public_addresses_for_any_launch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(network, "public_addresses", lambda: [("203.0.114.9", "eth0")])
    by_hand = exposure_here(given("--rdzv-endpoint", "head:29555"), {})
    assert by_hand is not None
    assert by_hand.startswith("this machine has public address(es) 203.0.114.9 (eth0)")
    assert "the rendezvous store on port 29555 of its host" in by_hand
    assert "which torch unpickles" in by_hand
    # One machine: its rendezvous is a file; only the workers' store listens beyond loopback.
    alone = exposure_here(given(), {})
    assert alone is not None and "the workers' store listens on every interface" in alone
    assert "rendezvous" not in alone and "unpickle" not in alone
    assert "the rendezvous store" in str(exposure_here(given(), {"PET_NNODES": "2"}))
    monkeypatch.setattr(network, "public_addresses", lambda: [])
    assert exposure_here(given("--rdzv-endpoint", "head:29555"), {}) is None
