"""Host ids the image already uses just work (linuxserver.io PUID/PGID, docker-stacks NB_UID).

A host user's files carry their ids whatever the image calls them: uid/gid 33 is `www-data`,
group 100 `users` (openSUSE's and many LDAP sites' primary group), 20 `dialout` (macOS's `staff`).
"""

from __future__ import annotations

import json
import shlex
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from . import ssh
from .ssh import KeyPair
from .stack import Stack
from .test_entrypoint import LOCAL_PACKAGE

pytestmark = [pytest.mark.container, pytest.mark.timeout(600, func_only=True)]


def create_in_jupyter(stack: Stack, name: str) -> None:
    """A file saved from JupyterLab: PUT /api/contents, as the editor does."""
    body = json.dumps({"type": "file", "format": "text", "content": "from jupyter\n"})
    request = urllib.request.Request(
        f"{stack.jupyter_url}/api/contents/{name}",
        data=body.encode(),
        method="PUT",
        headers={"Authorization": f"token {stack.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status in (200, 201)


def owner(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_uid, stat.st_gid


@pytest.mark.parametrize(
    ("puid", "pgid"),
    [("33", "33"), ("4242", "100"), ("501", "20")],
    ids=["www-data", "group-users", "macos-staff"],
)
def test_ids_the_image_already_uses_work_for_ssh_jupyter_and_pip(
    stack_factory: Callable[..., Stack], ssh_keys: KeyPair, puid: str, pgid: str
) -> None:
    stack = stack_factory(PUID=puid, PGID=pgid)
    stack.up()
    stack.wait_ready()
    with ssh.connect(stack.ssh_port, ssh_keys.private) as client:
        who = ssh.run(client, "id -un; id -u; id -g; echo x > /workspace/over-ssh")
        installed = ssh.run(client, f"bash -c {shlex.quote(LOCAL_PACKAGE)}")
    assert who.exit_code == 0, who.stderr
    assert who.stdout.split() == ["dev", puid, pgid]  # dev, not www-data, in ls -l and prompts
    assert installed.exit_code == 0, installed.stdout + installed.stderr
    assert f"INSTALLED {puid} /opt/packages/venv/lib/" in installed.stdout
    create_in_jupyter(stack, "from-jupyter.txt")
    expected = (int(puid), int(pgid))
    assert owner(stack.workspace / "over-ssh") == expected
    assert owner(stack.workspace / "from-jupyter.txt") == expected
