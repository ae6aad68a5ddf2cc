"""The remote end of the preflight, run here: a host's facts (the whole probe runs over a stand-in
for SSH in test_job.py)."""

from __future__ import annotations

import hashlib
import os
import pwd
from pathlib import Path

from torchrig import __version__
from torchrig.launch import network, probe


def test_facts_name_versions_and_the_scripts_hash(tmp_path: Path) -> None:
    (tmp_path / "t.py").write_text("print('hi')\n")
    facts = probe.facts(str(tmp_path), "t.py")
    assert facts["torchrig"] == __version__
    assert facts["torch"] == probe.package_version("torch") is not None
    assert facts["script_sha256"] == hashlib.sha256(b"print('hi')\n").hexdigest()


def test_a_missing_script_or_folder_is_reported(tmp_path: Path) -> None:
    assert "cannot read gone.py in" in probe.script_facts(str(tmp_path), "gone.py")["script_error"]
    missing = probe.script_facts(str(tmp_path / "nope"), None)["script_error"]
    assert missing.startswith(f"no folder {tmp_path / 'nope'} here")
    assert probe.script_facts(str(tmp_path), None) == {}


def test_facts_name_the_login_shell_and_the_public_addresses(tmp_path: Path) -> None:
    facts = probe.facts(str(tmp_path), None)
    assert facts["login_shell"] == pwd.getpwuid(os.getuid()).pw_shell
    assert facts["public_addresses"] == network.public_addresses()
