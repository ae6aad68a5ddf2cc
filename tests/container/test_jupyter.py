"""Jupyter on the running stack: the token is enforced, and a real browser runs a torch cell."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from .stack import Stack, http_status

pytestmark = [pytest.mark.container]

# An authenticated API endpoint: without a valid token Jupyter answers 403, not a login redirect.
API = "/api/contents"
# Kernel start and `import torch` on two shared cores take a while; this is a deadline, not a
# performance check.
CELL_TIMEOUT_MS = 180_000
CELL = "import torch; print(torch.__version__)"


@pytest.mark.timeout(120, func_only=True)
def test_api_without_token_is_forbidden(running_stack: Stack) -> None:
    assert http_status(f"{running_stack.jupyter_url}{API}") == 403


@pytest.mark.timeout(120, func_only=True)
@pytest.mark.parametrize("how", ["query", "header"])
def test_api_with_wrong_token_is_forbidden(running_stack: Stack, how: str) -> None:
    url = f"{running_stack.jupyter_url}{API}"
    if how == "query":
        status = http_status(f"{url}?token=not-{running_stack.token}")
    else:
        status = http_status(url, {"Authorization": f"token not-{running_stack.token}"})
    assert status == 403


@pytest.mark.timeout(120, func_only=True)
def test_api_with_the_token_is_allowed(running_stack: Stack) -> None:
    # The control for the two tests above: the same request with the right token works.
    headers = {"Authorization": f"token {running_stack.token}"}
    assert http_status(f"{running_stack.jupyter_url}{API}", headers) == 200


# The URL `make jupyter-url` prints (docker-stacks print it in the logs; here it stays out).
TOKEN_URL = re.compile(r"/lab\?token=([\w-]{16,})")


@pytest.mark.timeout(300, func_only=True)
def test_without_jupyter_token_a_generated_one_is_enforced_and_kept_out_of_the_logs(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(unset=("JUPYTER_TOKEN",))
    stack.up()
    stack.wait_healthy()
    code, output = stack.exec("/opt/venv/bin/python -I -m torchrig.jupyter.url", "dev")
    assert code == 0, output
    tokens = TOKEN_URL.findall(output)
    assert tokens, output
    assert tokens[-1] not in stack.logs()
    url = f"{stack.jupyter_url}{API}"
    assert http_status(url, {"Authorization": f"token {tokens[-1]}"}) == 200
    assert http_status(url) == 403


@pytest.mark.timeout(420, func_only=True)
def test_browser_creates_notebook_and_runs_torch_cell(
    running_stack: Stack, browser_page: object
) -> None:
    from playwright.sync_api import Page, expect

    page: Page = browser_page  # type: ignore[assignment]
    before = set(running_stack.workspace.glob("*.ipynb"))
    # ?reset: start from the default layout (the Launcher), whatever an earlier visit left open.
    page.goto(f"{running_stack.jupyter_url}/lab?reset&token={running_stack.token}")

    # The Launcher's "Python 3" card under Notebook creates a notebook and starts its kernel.
    card = page.locator('.jp-LauncherCard[data-category="Notebook"]').first
    card.click(timeout=120_000)
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    notebook = panel.locator(".jp-Notebook")
    expect(notebook).to_be_visible(timeout=60_000)
    # A cell run before the kernel is connected is silently dropped; the status bar names the
    # kernel and says Idle only once it answered kernel_info (before that: "No Kernel | ...").
    kernel_ready = page.get_by_text(re.compile(r"^Python 3 \(ipykernel\) \| Idle$"))
    expect(kernel_ready).to_be_visible(timeout=CELL_TIMEOUT_MS)

    editor = notebook.locator(".jp-Cell .jp-InputArea-editor .cm-content").first
    editor.click()
    page.keyboard.type(CELL)
    expect(editor).to_have_text(CELL)
    page.keyboard.press("Shift+Enter")

    first_cell = notebook.locator(".jp-CodeCell").first
    expect(first_cell.locator(".jp-InputPrompt")).to_have_text("[1]:", timeout=CELL_TIMEOUT_MS)
    output = first_cell.locator(".jp-OutputArea-output")
    expect(output).to_have_text(re.compile(r"^\s*\d+\.\d+\.\d+"), timeout=CELL_TIMEOUT_MS)
    # The notebook was made in the workspace, i.e. on the host's bind mount.
    assert set(running_stack.workspace.glob("*.ipynb")) - before
