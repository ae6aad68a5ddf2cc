"""NVIDIA's GPU dashboard in JupyterLab: the panel opens, and in CPU mode it says there is no GPU
(on the panel and on a GPU chart opened from it) instead of showing empty charts."""

from __future__ import annotations

import pytest

from .stack import Stack

pytestmark = [pytest.mark.container]

NO_GPU = "No NVIDIA GPU in this container (CPU mode)"


@pytest.mark.timeout(420, func_only=True)
def test_the_gpu_dashboard_says_there_is_no_gpu(running_stack: Stack, browser_page: object) -> None:
    from playwright.sync_api import Page, expect

    page: Page = browser_page  # type: ignore[assignment]
    page.goto(f"{running_stack.jupyter_url}/lab?reset&token={running_stack.token}")
    page.locator('.lm-TabBar-tab[data-id="gpu-dashboard"]').click(timeout=180_000)
    panel = page.locator("#gpu-dashboard")
    expect(panel.get_by_text("GPU Dashboards")).to_be_visible(timeout=60_000)
    expect(panel.get_by_text(NO_GPU)).to_be_visible(timeout=60_000)

    panel.get_by_role("button", name="GPU Utilization").click()
    chart = page.locator("#gpu-utilization-widget")
    expect(chart.get_by_text("GPU Utilization").first).to_be_visible(timeout=60_000)
    expect(chart.get_by_text(NO_GPU)).to_be_visible(timeout=60_000)
