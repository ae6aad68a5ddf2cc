"""Jupyter's Host-header (DNS-rebinding) check stays on behind Docker's port publishing (issue 9,
4.5): a page whose name was rebound to the workstation gets 403, even without a token, while the
published address and the names the user listed work."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .stack import Stack, http_status, wait_until

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


@pytest.mark.timeout(300, func_only=True)
def test_the_published_address_and_listed_names_work(open_stack: Stack) -> None:
    # The control for the test above: the same requests with the Host a browser sends.
    port = open_stack.jupyter_port
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"{LISTED}:{port}", f"[::1]:{port}"):
        assert status(open_stack, "/api/contents", host) == 200, host
