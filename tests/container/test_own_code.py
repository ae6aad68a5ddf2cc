"""Users' own code in the workstation, the way they run it: over SSH as dev, frameworks installed
with pip from PyPI (pinned in tests/users_code/frameworks.txt), `torchrig launch` and plain
`torchrun` typed in the session, and the mp.spawn shape of PyTorch's DDP tutorial.

The stack is started with torchrun's per-rank variables in its environment (as a scheduler might
set them): no session may see them, or accelerate and Lightning would take every command for a
torchrun worker.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator

import paramiko
import pytest

from . import ssh
from .conftest import running
from .stack import REPO_ROOT, Stack

pytestmark = [pytest.mark.container, pytest.mark.timeout(600, func_only=True)]

USERS_CODE = REPO_ROOT / "tests" / "users_code"
CODE = "/workspace/users_code"
LEAKY = {"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "TORCHELASTIC_RUN_ID": "stale"}
# Plain torchrun re-forms the group after a killed worker only by chance without the image's
# store fix (docs/benchmarks.md): repeated, so that a regression shows.
RESTART_REPEATS = 3


@pytest.fixture(scope="module")
def stack(make_stack_in, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("own-code")
    override = root / "compose.leaky.yml"
    variables = "".join(f'      {name}: "{value}"\n' for name, value in LEAKY.items())
    override.write_text(f"services:\n  workstation:\n    environment:\n{variables}")
    with running(make_stack_in(root, extra_files=(override,))) as started:
        shutil.copytree(USERS_CODE, started.workspace / "users_code")
        yield started


@pytest.fixture(scope="module")
def frameworks(session: paramiko.SSHClient) -> None:
    """accelerate and Lightning Fabric from PyPI, as dev would install them."""
    result = ssh.run(session, f"pip install -q -r {CODE}/frameworks.txt", timeout_s=900)
    assert result.exit_code == 0, result.stdout + result.stderr


def run(session: paramiko.SSHClient, command: str) -> ssh.Result:
    return ssh.run(session, f"cd /workspace && {command}")


def fresh_output(stack: Stack, name: str) -> str:
    """An empty folder for one run's files, made by dev; its path in the container."""
    code, output = stack.exec(f"rm -rf /workspace/out/{name} && mkdir -p /workspace/out/{name}",
                              user="dev")  # fmt: skip
    assert code == 0, output
    return f"/workspace/out/{name}"


def read(stack: Stack, container_dir: str, name: str) -> str:
    return (stack.workspace / container_dir.removeprefix("/workspace/") / name).read_text()


def test_no_session_sees_torchruns_per_rank_variables(session: paramiko.SSHClient) -> None:
    result = run(session, "env")
    names = {line.split("=", 1)[0] for line in result.stdout.splitlines()}
    assert not names & set(LEAKY), result.stdout
    # What the image gives every session instead: the restart-round fix.
    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1" in result.stdout.splitlines()


@pytest.mark.parametrize(
    ("script", "args", "result"),
    [
        ("accelerate_train.py", "", "rank {rank} of 2: 32 gathered\n"),
        ("fabric_train.py", "2", "rank {rank} of 2: 2\n"),
        ("plain_dist.py", "", "rank {rank} of 2: 4 in round 0\n"),
    ],
)
def test_a_framework_script_runs_once_under_launch(
    stack: Stack, session: paramiko.SSHClient, frameworks: None, script: str, args: str, result
) -> None:
    out = fresh_output(stack, script.removesuffix(".py"))
    done = run(session, f"torchrig launch --nproc-per-node 2 {CODE}/{script} {out} {args}")
    assert done.exit_code == 0, done.stdout + done.stderr
    ranks_started = sorted(line.split()[1] for line in read(stack, out, "runs.log").splitlines())
    assert ranks_started == ["0", "1"]  # the job ran once
    for rank in (0, 1):
        assert read(stack, out, f"result-{rank}.txt") == result.format(rank=rank)


def test_the_ddp_tutorials_mp_spawn_script_runs_with_plain_python(
    stack: Stack, session: paramiko.SSHClient
) -> None:
    out = fresh_output(stack, "spawn")
    done = run(session, f"python {CODE}/spawn_ddp.py {out}")
    assert done.exit_code == 0, done.stdout + done.stderr
    assert "spawn done" in done.stdout
    for rank in (0, 1):
        assert read(stack, out, f"result-{rank}.txt") == f"rank {rank} of 2\n"


def test_a_spawned_worker_dying_in_teardown_after_its_work_does_not_fail_mp_spawn(
    stack: Stack, session: paramiko.SSHClient
) -> None:
    """gloo's threads make a spawned worker die in Python's teardown by chance (about 1 run in
    10); the script makes it happen every time. The image's hook ends such a worker before it."""
    out = fresh_output(stack, "spawn-teardown")
    done = run(session, f"python {CODE}/spawn_ddp.py {out} --teardown-rank 1")
    assert done.exit_code == 0, done.stdout + done.stderr
    assert "spawn done" in done.stdout
    assert read(stack, out, "left-open-1.txt") == "rank 1 left this open\n"


@pytest.mark.parametrize("attempt", range(RESTART_REPEATS))
def test_plain_torchrun_restarts_a_killed_worker_and_round_1_finishes(
    stack: Stack, session: paramiko.SSHClient, attempt: int
) -> None:
    out = fresh_output(stack, f"restart-{attempt}")
    done = run(
        session,
        "torchrun --standalone --nproc-per-node 2 --max-restarts 1 "
        f"{CODE}/plain_dist.py {out} --kill-rank 1",
    )
    output = done.stdout + done.stderr
    assert done.exit_code == 0, output
    starts = sorted(read(stack, out, "runs.log").splitlines())
    assert starts == ["start 0 0", "start 0 1", "start 1 0", "start 1 1"], output
    assert "[torchrig] restart round 1 of 1: the script starts again" in output.splitlines()


def test_plain_torchrun_does_not_rerun_a_job_whose_rank_died_in_teardown(
    stack: Stack, session: paramiko.SSHClient
) -> None:
    """`python -m torch.distributed.run`, as typed: the image's `.pth` hook ends the rank with its
    script's status before the teardown's abort (made on purpose, every time), and what the rank
    left in an open file is on disk."""
    out = fresh_output(stack, "teardown")
    done = run(
        session,
        "python -m torch.distributed.run --standalone --nproc-per-node 2 --max-restarts 1 "
        f"{CODE}/plain_dist.py {out} --teardown-rank 1",
    )
    output = done.stdout + done.stderr
    assert done.exit_code == 0, output
    assert sorted(read(stack, out, "runs.log").splitlines()) == ["start 0 0", "start 1 0"]
    assert "SIGABRT" not in output, output
    assert read(stack, out, "result-1.txt") == "rank 1 of 2: 4 in round 0\n"


def test_each_rank_is_one_process_and_status_shows_the_script(
    stack: Stack, session: paramiko.SSHClient
) -> None:
    """torchrun's worker runs the script itself (the hook execs it in place): `torchrig status`
    shows one worker per rank, torchrun's child, running the script. Looked at once both ranks'
    scripts run (each leaves a file), after the exec."""
    script = stack.workspace / "users_code" / "slow.py"
    ready = fresh_output(stack, "slow")
    script.write_text(
        "import time, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        f"open(f'{ready}/ready-{{dist.get_rank()}}', 'w').close()\n"
        "time.sleep(600)\n"
    )
    # `cd; cmd &`, not `cd && cmd &`: the latter backgrounds a subshell holding the channel open.
    started = ssh.run(
        session,
        "cd /workspace; nohup torchrun --standalone --nproc-per-node 2 users_code/slow.py "
        "< /dev/null > /tmp/slow.log 2>&1 & echo started",
    )
    assert started.exit_code == 0, started.stderr
    try:
        deadline = time.monotonic() + 120
        readiness = stack.workspace / ready.removeprefix("/workspace/")
        while len(list(readiness.glob("ready-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        status = run(session, "torchrig status --json").stdout
        jobs = json.loads(status)["jobs"]
        workers = [w for w in jobs[0]["workers"] if "rank" in w] if jobs else []
        assert sorted(worker["rank"] for worker in workers) == [0, 1], status
        commands = [" ".join(w["command"]) for w in workers]
        assert all("torchrig.pth.rank_exit" in c for c in commands), status
        assert all(c.endswith(" users_code/slow.py") for c in commands), status
        pids = [w["pid"] for w in workers]
        processes = run(session, f"ps -o ppid= -p {','.join(map(str, pids))}").stdout.split()
        assert set(processes) == {str(jobs[0]["pid"])}, status
    finally:
        run(session, "pkill -f users_code/slow.py; pkill -f torch.distributed.run; true")
