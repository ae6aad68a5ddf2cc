"""Jupyter's Host-header (DNS-rebinding) check stays on behind Docker's port publishing: a
page whose name was rebound to the workstation gets 403, even without a token, while the
published address and the names the user listed work."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from .stack import Stack, http_status, jupyter_cannot_start, wait_until

pytestmark = [pytest.mark.container]

LISTED = "gpubox.test"
PATHS = ("/api/contents", "/api/kernels", "/lab", "/tensorboard/")


@pytest.fixture(scope="module")
def open_stack(make_stack_in: Callable[..., Stack], tmp_path_factory: pytest.TempPathFactory):
    """A stack without a token (JUPYTER_ALLOW_NO_TOKEN=1): the case the check matters most."""
    stack = make_stack_in(
        tmp_path_factory.mktemp("open"),
        unset=("JUPYTER_TOKEN",),
        JUPYTER_ALLOW_NO_TOKEN="1",
        JUPYTER_HOSTNAMES=LISTED,
    )
    try:
        stack.up()
        stack.wait_healthy()
        wait_until(
            "Jupyter on its host port",
            lambda: http_status(f"{stack.jupyter_url}/api/contents") == 200,
            timeout_s=60,
        )
        yield stack
    finally:
        stack.down(volumes=True)


def status(stack: Stack, path: str, host: str) -> int:
    return http_status(f"{stack.jupyter_url}{path}", {"Host": host})


@pytest.mark.timeout(300, func_only=True)
def test_a_foreign_host_is_refused_even_without_a_token(open_stack: Stack) -> None:
    port = open_stack.jupyter_port
    for host in (f"evil.example:{port}", f"127.0.0.1.evil.example:{port}", "localhost.evil"):
        for path in PATHS:
            assert status(open_stack, path, host) == 403, (host, path)
    assert "refused Host 'evil.example:" in open_stack.logs()


def healthcheck_runs(stack: Stack) -> dict[str, int]:
    """The engine's last healthcheck runs (it keeps five): start time -> exit code."""
    container = stack.container()
    container.reload()
    runs = container.attrs["State"].get("Health", {}).get("Log", [])
    return {run["Start"]: run["ExitCode"] for run in runs}


@pytest.mark.timeout(300, func_only=True)
def test_the_healthcheck_writes_nothing_to_the_log_and_a_page_s_refusal_still_does(
    open_stack: Stack,
) -> None:
    earlier = healthcheck_runs(open_stack)

    def passed_since() -> int:
        return sum(
            1
            for start, code in healthcheck_runs(open_stack).items()
            if start not in earlier and code == 0
        )

    wait_until("three more healthchecks to pass", lambda: passed_since() >= 3)
    logs = open_stack.logs()
    assert "rebinding-check.invalid" not in logs
    assert not re.search(r"403 GET /api \(", logs), logs[-3000:]
    # A rebinding page's request to the same URL: refused and logged, both lines.
    port = open_stack.jupyter_port
    assert status(open_stack, "/api", f"rebound.example:{port}") == 403
    wait_until(
        "the refusal in the log", lambda: "refused Host 'rebound.example:" in open_stack.logs()
    )
    assert len(re.findall(r"403 GET /api \(", open_stack.logs())) == 1


@pytest.mark.timeout(300, func_only=True)
def test_the_published_address_and_listed_names_work(open_stack: Stack) -> None:
    # The control for the test above: the same requests with the Host a browser sends.
    port = open_stack.jupyter_port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"{LISTED}:{port}", f"[::1]:{port}"):
        assert status(open_stack, "/api/contents", host) == 200, host


# --- Jupyter without its Host check ---------------------------------------------------------------
# The extension broken for Jupyter alone: a copy of torchrig that shadows the venv's, on a
# PYTHONPATH only Jupyter's environment has (root's steps run in isolated mode, and ignore it).

BROKEN = {
    "import": "raise ImportError('torchrig.jupyter.hosts broken for the test')\n",
    "load": (
        "def _jupyter_server_extension_points():\n"
        "    return [{'module': __name__}]\n"
        "def _load_jupyter_server_extension(serverapp):\n"
        "    raise RuntimeError('torchrig.jupyter.hosts broken for the test')\n"
    ),
}
# Loads, and installs nothing: Jupyter serves without the check.
SILENT = "def _jupyter_server_extension_points():\n    return [{'module': __name__}]\n" + (
    "def _load_jupyter_server_extension(serverapp):\n    pass\n"
)


def shadowing_stack(
    stack_factory: Callable[..., Stack],
    tmp_path: Path,
    module_text: str,
    unset: tuple[str, ...] = (),
    **overrides: str,
) -> Stack:
    override = tmp_path / "compose.shadow.yml"
    override.write_text(
        "services:\n  workstation:\n    environment:\n      PYTHONPATH: /workspace/.shadow\n"
    )
    stack = stack_factory(extra_files=(override,), unset=unset, **overrides)
    package = stack.workspace / ".shadow" / "torchrig"
    (package / "jupyter").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "jupyter" / "__init__.py").write_text("")
    (package / "jupyter" / "hosts.py").write_text(module_text)
    return stack


@pytest.mark.timeout(420, func_only=True)
@pytest.mark.parametrize("failure", sorted(BROKEN))
def test_jupyter_refuses_to_start_without_its_host_check(
    stack_factory: Callable[..., Stack], tmp_path: Path, failure: str
) -> None:
    # Without a token, the case the check matters most.
    stack = shadowing_stack(
        stack_factory,
        tmp_path,
        BROKEN[failure],
        unset=("JUPYTER_TOKEN",),
        JUPYTER_ALLOW_NO_TOKEN="1",
        SERVICES="jupyter",
    )
    stack.up()
    jupyter_cannot_start(stack)
    logs = stack.logs()
    assert "torchrig.jupyter.hosts broken for the test" in logs  # Jupyter's own traceback
    assert "is running at" not in logs  # it never served, not once, without the check


@pytest.mark.timeout(300, func_only=True)
def test_the_healthcheck_reports_jupyter_that_answers_a_foreign_host(
    stack_factory: Callable[..., Stack], tmp_path: Path
) -> None:
    stack = shadowing_stack(stack_factory, tmp_path, SILENT, SERVICES="jupyter")
    stack.up()
    wait_until(
        "Jupyter on its host port",
        lambda: http_status(f"{stack.jupyter_url}/api") == 200,
        timeout_s=180,
        on_timeout=stack.logs,
    )
    # No check: the attack the healthcheck must notice.
    assert status(stack, "/api", f"evil.example:{stack.jupyter_port}") == 200
    code, output = stack.exec("/usr/bin/python3 -I -S /usr/lib/torchrig healthcheck")
    assert (code, output) == (
        1,
        "unhealthy: jupyter: it answers a request for Host 'rebinding-check.invalid' with 200 "
        "instead of 403: its Host check (torchrig.jupyter.hosts) is off, so a DNS-rebinding "
        "web page could reach it\n",
    )
    # Failures count once the start period (60 s) is over, then three in a row.
    wait_until("Docker to see it unhealthy", lambda: stack.health() == "unhealthy", timeout_s=150)
