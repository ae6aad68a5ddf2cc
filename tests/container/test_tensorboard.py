"""TensorBoard inside JupyterLab: a Launcher item, served at /tensorboard/ behind Jupyter's token,
showing the example's scalars from /checkpoints, with no port of its own."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator

import pytest

from .stack import Stack, http_status, wait_until
from .training import train

pytestmark = [pytest.mark.container]

RUN_DIR = "/checkpoints/tensorboard-test"
# TensorBoard's own name for the run: the event files' folder under its logdir (/checkpoints).
RUN_NAME = "tensorboard-test/tensorboard"
# Starting TensorBoard and reading the events takes a while on two shared cores: deadlines.
TENSORBOARD_TIMEOUT_MS = 240_000
PUBLISHED_PORTS = {8888, 2222}


@pytest.fixture(scope="module")
def trained_stack(running_stack: Stack) -> Iterator[Stack]:
    """The shared stack, after the example's tiny training wrote its event files."""
    train(running_stack, RUN_DIR)
    yield running_stack


def authorized(stack: Stack) -> dict[str, str]:
    return {"Authorization": f"token {stack.token}"}


def get_json(url: str, headers: dict[str, str]) -> object:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as reply:
        return json.loads(reply.read())


@pytest.mark.timeout(900, func_only=True)
def test_the_launcher_opens_tensorboard_with_the_examples_scalars(
    trained_stack: Stack, browser_page: object
) -> None:
    from playwright.sync_api import Page, expect

    page: Page = browser_page  # type: ignore[assignment]
    page.goto(f"{trained_stack.jupyter_url}/lab?reset&token={trained_stack.token}")
    page.locator('.jp-LauncherCard[title="TensorBoard"]').click(timeout=180_000)
    # A JupyterLab tab (not a new browser tab) whose frame is TensorBoard, served by the proxy.
    frame_element = page.locator(".jp-ServerProxy iframe")
    expect(frame_element).to_have_attribute("src", re.compile(r"/tensorboard/$"))
    tensorboard = page.frame_locator(".jp-ServerProxy iframe")
    expect(tensorboard.get_by_text(RUN_NAME).first).to_be_visible(timeout=TENSORBOARD_TIMEOUT_MS)
    for tag in ("train/loss", "train/lr"):
        expect(tensorboard.get_by_text(tag, exact=True).first).to_be_visible(timeout=60_000)


@pytest.mark.timeout(600, func_only=True)
def test_tensorboard_needs_the_token(trained_stack: Stack) -> None:
    base = f"{trained_stack.jupyter_url}/tensorboard"
    # With the token: TensorBoard itself answers (started on this first request), with the run.
    wait_until(
        "TensorBoard behind the proxy",
        lambda: http_status(f"{base}/data/runs", authorized(trained_stack)) == 200,
        timeout_s=TENSORBOARD_TIMEOUT_MS / 1000,
        interval_s=3,
    )
    runs = get_json(f"{base}/data/runs", authorized(trained_stack))
    assert isinstance(runs, list) and RUN_NAME in runs
    tags = get_json(f"{base}/data/plugin/scalars/tags", authorized(trained_stack))
    assert isinstance(tags, dict) and "train/loss" in tags[RUN_NAME]
    # Without it, or with a wrong one: Jupyter's login page or 403, never TensorBoard's data.
    for headers in ({}, {"Authorization": f"token not-{trained_stack.token}"}):
        for path in ("/", "/data/runs", "/data/plugin/scalars/tags"):
            assert http_status(f"{base}{path}", headers) in {302, 403}


@pytest.mark.timeout(600, func_only=True)
def test_tensorboard_listens_on_loopback_only(trained_stack: Stack) -> None:
    wait_until(
        "TensorBoard behind the proxy",
        lambda: (
            http_status(f"{trained_stack.jupyter_url}/tensorboard/", authorized(trained_stack))
            == 200
        ),
        timeout_s=TENSORBOARD_TIMEOUT_MS / 1000,
        interval_s=3,
    )
    code, tables = trained_stack.exec("cat /proc/net/tcp /proc/net/tcp6")
    assert code == 0, tables
    listeners = listening_sockets(tables)
    others = {(address, port) for address, port in listeners if port not in PUBLISHED_PORTS}
    assert others, f"TensorBoard's listener is missing: {listeners}"
    # Only the published ports face the container's network; TensorBoard's is loopback.
    assert all(is_loopback(address) for address, _port in others), listeners


def listening_sockets(tables: str) -> set[tuple[str, int]]:
    """(hex address, port) of every LISTEN socket in /proc/net/tcp and tcp6."""
    found = set()
    for line in tables.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3] == "0A" and ":" in fields[1]:
            address, _, port = fields[1].rpartition(":")
            found.add((address, int(port, 16)))
    return found


def is_loopback(hex_address: str) -> bool:
    # /proc/net/tcp writes 127.0.0.1 as 0100007F; tcp6 writes ::1 as 32 hex digits ending 01000000
    # (and ::ffff:127.0.0.1 as ...FFFF0000 0100007F).
    return hex_address.endswith("7F") or hex_address == "00000000000000000000000001000000"
