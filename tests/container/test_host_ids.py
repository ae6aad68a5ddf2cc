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


# dev fills what it writes to: pip's cache and the kept packages, HF_HOME, the compile cache.
FILL_THE_VOLUMES = (
    "pip install --no-input torch-ema==0.3 && "
    'mkdir -p "$HF_HOME/hub" "$TORCHINDUCTOR_CACHE_DIR" && '
    'echo model > "$HF_HOME/hub/weights.bin" && echo kernel > "$TORCHINDUCTOR_CACHE_DIR/k.py" && '
    # A symlink to one of root's files, which a walk that follows links would hand to dev.
    "ln -s /usr/lib/torchrig/__main__.py ~/.cache/link-to-roots"
)
# Every file of the two volumes, and whose it is (the symlink itself, not what it points to).
OWNERS = "find /home/dev/.cache /opt/packages -printf '%u:%g %p\\n'"
CACHE_DISABLED = "The cache has been disabled"


def test_after_a_puid_change_every_volume_dev_writes_to_is_devs_again(
    stack_factory: Callable[..., Stack], ssh_keys: KeyPair
) -> None:
    stack = stack_factory()  # PUID 4242, PGID 4343
    stack.up()
    stack.wait_ready()
    with ssh.connect(stack.ssh_port, ssh_keys.private) as client:
        filled = ssh.run(client, FILL_THE_VOLUMES, timeout_s=600)
    assert filled.exit_code == 0, filled.stdout + filled.stderr
    # A root file hard-linked into the cache (dev could, where fs.protected_hardlinks=0): left
    # to root, not handed to dev with the rest.
    code, output = stack.exec("echo root > /home/dev/.cache/roots && "
                              "ln /home/dev/.cache/roots /home/dev/.cache/linked")  # fmt: skip
    assert code == 0, output
    stack.down(volumes=False)
    stack.variables.update(PUID="5151", PGID="5252")
    stack.up()
    stack.wait_ready()
    code, listing = stack.exec(OWNERS)
    assert code == 0, listing
    owners = dict(reversed(line.split(" ", 1)) for line in listing.splitlines())
    not_devs = {path: who for path, who in owners.items() if who != "dev:dev"}
    assert not_devs == {
        "/home/dev/.cache/roots": "root:root",
        "/home/dev/.cache/linked": "root:root",
    }, not_devs
    assert owners["/opt/packages/venv/bin/python"] == "dev:dev"
    code, output = stack.exec("stat -c '%u:%g' /usr/lib/torchrig/__main__.py")
    assert output.strip() == "0:0"
    logs = stack.logs()
    assert "/home/dev/.cache belonged to uid 4242, gid 4343: handed it" in logs
    assert "/opt/packages belonged to uid 4242, gid 4343: handed it" in logs
    assert "left /home/dev/.cache/linked to its owner: it has other hard links" in logs
    with ssh.connect(stack.ssh_port, ssh_keys.private) as client:
        again = ssh.run(client, "id -u && pip install --no-input --force-reinstall --no-deps "
                                "torch-ema==0.3 && python -c 'import torch_ema'")  # fmt: skip
    assert again.exit_code == 0, again.stdout + again.stderr
    assert again.stdout.split()[0] == "5151"
    assert CACHE_DISABLED not in again.stdout + again.stderr
