"""no-new-privileges for what the start runs: set for good, read back from /proc, and sudo
refused up front where it could never work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from torchrig.container import privileges
from torchrig.container.log import SetupError

STATUS = "Name:\tpython3\nUmask:\t0022\nNoNewPrivs:\t{flag}\nSeccomp:\t2\n"


def status_file(tmp_path: Path, flag: int) -> Path:
    path = tmp_path / "status"
    path.write_text(STATUS.format(flag=flag))
    return path


def test_the_flag_is_read_from_the_status_file(tmp_path: Path) -> None:
    assert privileges.no_new_privileges(status_file(tmp_path, 1))
    assert not privileges.no_new_privileges(status_file(tmp_path, 0))


def test_setting_it_holds_for_the_process_and_what_it_starts() -> None:
    # In a child: the flag can never be unset, and the test session must keep its own.
    program = (
        "import subprocess\n"
        "from torchrig.container import privileges\n"
        "privileges.set_no_new_privileges()\n"
        "print(privileges.no_new_privileges())\n"
        "print(subprocess.run(['grep', 'NoNewPrivs', '/proc/self/status'],"
        " capture_output=True, text=True).stdout.split()[-1])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["True", "1"]


def test_grant_sudo_under_no_new_privileges_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(SetupError, match=r"^GRANT_SUDO=1, but the container runs with no-new"):
        privileges.check_sudo_possible(True, status_file(tmp_path, 1))
    privileges.check_sudo_possible(True, status_file(tmp_path, 0))
    privileges.check_sudo_possible(False, status_file(tmp_path, 1))
