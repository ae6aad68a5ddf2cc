"""Host ids the image already uses just work (linuxserver.io PUID/PGID, docker-stacks NB_UID).

A host user's files carry their ids whatever the image calls them: uid/gid 33 is `www-data`,
group 100 `users` (openSUSE's and many LDAP sites' primary group), 20 `dialout` (macOS's `staff`).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from torchrig.shared import mounts

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
    'mkdir -p "$HF_HOME/hub" && echo model > "$HF_HOME/hub/weights.bin" && '
    # A symlink to one of root's files, which a walk that follows links would hand to dev.
    "ln -s /usr/lib/torchrig/__main__.py ~/.cache/link-to-roots"
)
CACHE_DISABLED = "The cache has been disabled"


def volume_owners(image: str, volume: str) -> set[str]:
    """Who owns each file of a volume (symlinks themselves), read by a container of its own."""
    found = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "find", "-v", f"{volume}:/v", image, "/v",
         "-printf", "%U:%G\\n"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return set(found.stdout.split())


def test_after_a_puid_change_a_volume_of_the_old_ids_stops_the_start_with_the_fix_unwalked(
    stack_factory: Callable[..., Stack], ssh_keys: KeyPair
) -> None:
    stack = stack_factory()  # PUID 4242, PGID 4343
    stack.up()
    stack.wait_ready()
    with ssh.connect(stack.ssh_port, ssh_keys.private) as client:
        filled = ssh.run(client, FILL_THE_VOLUMES, timeout_s=600)
    assert filled.exit_code == 0, filled.stdout + filled.stderr
    stack.down(volumes=False)
    stack.variables.update(PUID="5151", PGID="5252")
    refused = stack.make_up("CPU=1")
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0, said
    volumes = {volume.point: f"{stack.name}_{volume.name}" for volume in mounts.VOLUMES}
    for point, name in volumes.items():
        assert (
            f"{point} (volume {name}) holds files of uid 4242, gid 4343, and dev is uid 5151, gid "
            "5252 now (PUID/PGID changed since): the start hands no files over. Set PUID=4242 "
            f"PGID=4343 again, or start the volume afresh, losing "
        ) in said, said
        assert f"`make down && docker volume rm {name} && make up`" in said
        assert volume_owners(stack.variables["TORCHRIG_IMAGE"], name) == {"4242:4343"}
    # The fix, as it says.
    stack.down(volumes=False)
    for name in volumes.values():
        subprocess.run(["docker", "volume", "rm", name], capture_output=True, check=True)
    up = stack.make_up("CPU=1")
    assert up.returncode == 0, up.stdout + up.stderr
    with ssh.connect(stack.ssh_port, ssh_keys.private) as client:
        again = ssh.run(client, "id -u && pip install --no-input torch-ema==0.3 && "
                                "python -c 'import torch_ema'", timeout_s=600)  # fmt: skip
    assert again.exit_code == 0, again.stdout + again.stderr
    assert again.stdout.split()[0] == "5151"
    assert CACHE_DISABLED not in again.stdout + again.stderr
