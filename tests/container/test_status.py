"""`torchrig status` in the container sees a running torchrun job."""

from __future__ import annotations

import json
import shlex

import pytest

from .stack import Stack, wait_until
from .training import torchrun_command

pytestmark = [pytest.mark.container]

CHECKPOINT_DIR = "/checkpoints/status-test"


def status_json(stack: Stack) -> dict:
    code, output = stack.exec("torchrig status --json 2>/dev/null", user="dev")
    assert code == 0, output
    return json.loads(output)


@pytest.mark.timeout(600, func_only=True)
def test_status_shows_the_running_job_and_its_workers(running_stack: Stack) -> None:
    # Long enough to be seen running, with a checkpoint every 5 steps. `exec` makes the shell's
    # pid torchrun's: the pid file names the job to look for and to stop.
    torchrun = torchrun_command(
        running_stack, CHECKPOINT_DIR, "--steps", "2000", "--checkpoint-every", "5",
        "--step-delay", "0.2",
    )  # fmt: skip
    pid_file, log = "/tmp/status-test.pid", "/tmp/status-test.log"
    background = f"cd /workspace && echo $$ > {pid_file} && exec {torchrun} > {log} 2>&1"
    running_stack.container().exec_run(["sh", "-c", background], user="dev", detach=True)
    host_dir = running_stack.checkpoints / CHECKPOINT_DIR.removeprefix("/checkpoints/")
    try:
        wait_until(
            "the job's first checkpoint",
            lambda: (host_dir / "latest").exists(),
            timeout_s=300,
            interval_s=2,
            on_timeout=lambda: running_stack.exec(f"cat {log}")[1],
        )
        agent = int(running_stack.exec(f"cat {pid_file}")[1])
        report = status_json(running_stack)
        jobs = {job["pid"]: job for job in report["jobs"]}
        assert agent in jobs, report["jobs"]
        job = jobs[agent]
        assert any(arg.endswith("train_ddp.py") for arg in job["command"])
        assert [worker["rank"] for worker in job["workers"]] == [0]
        assert job["running_s"] > 0
        # CPU mode: no GPU, said as such rather than as an error.
        assert report["gpus"]["available"] is False and report["gpus"]["cpu_mode"] is True
        code, text = running_stack.exec("torchrig status", user="dev")
        assert code == 0, text
        assert text.startswith("GPUs: none (CPU mode)\n") and "NVML" not in text, text
        assert f"pid {agent}, running " in text and "workers: " in text, text
    finally:
        running_stack.exec(f"test -s {pid_file} && kill $(cat {pid_file})", user="dev")


OSC52 = "\x1b]52;c;cHduZWQ=\x07"  # sets the host terminal's clipboard in several terminals
# A sharded checkpoint whose metadata names a class with OSC 52 in its name: `ls` says why it is
# bad, naming what the metadata refers to.
CRAFTED_CHECKPOINT = (
    "import pathlib; folder = pathlib.Path('/checkpoints/crafted/step_00000001'); "
    f"folder.mkdir(); (folder / '.metadata').write_text('cpathlib\\none{OSC52}\\n.')"
)
# A process of dev's that looks like a torchrun agent, with OSC 52 among its arguments.
AGENT = (
    f"(exec -a torchrun python3 -c 'import time; time.sleep(300)' '{OSC52}') "
    ">/dev/null 2>&1 & echo $!"
)


def test_what_root_s_torchrig_shows_of_dev_s_checkpoints_and_processes_is_harmless(
    running_stack: Stack,
) -> None:
    """Root's `torchrig ckpt ls` of dev's checkpoint and `torchrig status` beside dev's
    processes: what dev chose is shown as text, the OSC 52 escape dropped."""
    code, output = running_stack.exec("mkdir -p /checkpoints/crafted", user="dev")
    assert code == 0, output
    code, output = running_stack.exec(f"python -c {shlex.quote(CRAFTED_CHECKPOINT)}", user="dev")
    assert code == 0, output
    code, agent = running_stack.exec(f"bash -c {shlex.quote(AGENT)}", user="dev")
    assert code == 0, agent
    try:
        for command, expected, text in (
            ("torchrig ckpt ls /checkpoints/crafted", 2, "refers to pathlib.one, "),
            ("torchrig status", 0, f"pid {agent.strip()}, running "),
        ):
            code, shown = running_stack.exec(command)  # as root
            assert code == expected and text in shown, shown
            assert "\x1b" not in shown and "52;c;" not in shown, f"{command}: {shown!r}"
    finally:
        running_stack.exec(f"kill {agent.strip()}; rm -rf /checkpoints/crafted", user="dev")
