"""Jupyter's token stays the same across `make up`, `make down`/`make up` and Docker's restarts
(an open browser tab keeps working) until `make jupyter-token-rotate` makes a new one. It is
kept on the host, in `.env`, readable by its owner alone."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .checkouts import Checkout, a_persons_own_workstation
from .ssh import KeyPair
from .stack import http_status, wait_until

pytestmark = [pytest.mark.container, pytest.mark.timeout(900, func_only=True)]

URL = re.compile(r"Jupyter: (http://[^\s]+/lab\?token=([0-9a-f]+))")


@pytest.fixture
def checkout(tmp_path: Path, image: str, ssh_keys: KeyPair) -> Iterator[Checkout]:
    with a_persons_own_workstation(image):
        made = Checkout.copy(tmp_path, image, ssh_keys.public_line)
        try:
            yield made
        finally:
            made.remove()


def url_of(checkout: Checkout, *make_args: str) -> tuple[str, str]:
    """The URL and token a make target printed (it must succeed)."""
    done = checkout.make(*make_args, "CPU=1")
    found = URL.search(done.stdout)
    assert done.returncode == 0 and found, done.stdout
    return found.group(1), found.group(2)


def opens(url: str) -> bool:
    return http_status(url.replace("/lab?token=", "/api/status?token=")) == 200


def test_the_token_outlives_down_up_and_restarts_until_it_is_rotated(checkout: Checkout) -> None:
    prepared = checkout.make("prepare")
    assert prepared.returncode == 0, prepared.stdout
    token = checkout.env_value("JUPYTER_TOKEN")
    assert token and (checkout.env_file.stat().st_mode & 0o777) == 0o600
    checkout.give_image()
    url, first = url_of(checkout, "up")
    assert first == token and opens(url)
    assert checkout.make("down").returncode == 0
    assert url_of(checkout, "up")[1] == token
    restarted = subprocess.run(
        ["docker", "restart", checkout.container()["Id"]], capture_output=True, check=False
    )
    assert restarted.returncode == 0, restarted.stderr
    wait_until("Jupyter to answer the old tab after the restart", lambda: opens(url),
               timeout_s=120)  # fmt: skip
    new_url, rotated = url_of(checkout, "jupyter-token-rotate")
    assert rotated != token and rotated == checkout.env_value("JUPYTER_TOKEN")
    assert opens(new_url) and not opens(url)
