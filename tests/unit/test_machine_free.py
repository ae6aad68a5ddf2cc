"""A unit test sees nothing of the machine it runs on: not the real HOME (whose ~/.ssh holds the
key the README asks for), not a `.env` where it was started, not the settings a person exported,
not the Docker engine (tests/unit/conftest.py). Proven where it matters: on a machine that has all
of them, run as `make test-unit` runs them."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

from torchrig.host import settings

REPO_ROOT = Path(__file__).resolve().parents[2]
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOVIn3vrfO52GQr5ULEVFwWTv38bAMv/OjVX3L/DwZFJ me@box"
# What a newcomer's machine has after `make up`: the settings it wrote, and some exported.
HOSTILE_DOTENV = (
    "COMPOSE_PROJECT_NAME=torchrig-someone\nMEMLOCK=8388608\nPUID=0\nJUPYTER_PORT=1\n"
    f"SSH_PUBLIC_KEY='{KEY}'\nGPUS=7\n"
)
HOSTILE_ENVIRONMENT = {
    "MEMLOCK": "8388608",
    "COMPOSE_PROJECT_NAME": "torchrig-someone",
    "SSH_PORT": "1",
    "CPU": "1",
    "TORCHRIG_IMAGE": "someone/workstation:latest",
    "DOCKER_CONTEXT": "default",
}


def test_a_unit_test_sees_nothing_of_the_machine() -> None:
    home = Path.home()
    assert home != Path(pwd.getpwuid(os.getuid()).pw_dir)
    assert not (home / ".ssh").exists()
    assert Path.cwd() != REPO_ROOT and not Path(".env").exists()
    known = settings.known_names(REPO_ROOT)
    foreign = settings.FOREIGN_PREFIXES
    seen = [name for name in os.environ if name in known or name.startswith(foreign)]
    assert seen == ["DOCKER_HOST"], seen  # pointed where no engine answers
    engine = subprocess.run(["docker", "info"], capture_output=True, timeout=60, check=False)
    assert engine.returncode != 0


def test_the_unit_tests_pass_on_a_machine_with_a_key_a_dotenv_and_settings(
    tmp_path: Path,
) -> None:
    """The tests that read HOME and `.env` (and the one above), as `make test-unit` runs them
    on such a machine: started from a folder with a `.env`, HOME with a key in ~/.ssh."""
    home, started_in = tmp_path / "home", tmp_path / "checkout"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519.pub").write_text(KEY + "\n")
    started_in.mkdir()
    (started_in / ".env").write_text(HOSTILE_DOTENV)
    environment = {**os.environ, **HOSTILE_ENVIRONMENT, "HOME": str(home)}
    environment.pop("DOCKER_HOST", None)  # the engine this machine has
    this = Path(__file__).relative_to(REPO_ROOT)
    result = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            f"--rootdir={REPO_ROOT}",
            str(REPO_ROOT / "tests/unit/host/test_dotenv.py"),
            f"{REPO_ROOT / this}::test_a_unit_test_sees_nothing_of_the_machine",
        ],
        cwd=started_in,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
