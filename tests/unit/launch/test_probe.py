"""The remote end of the preflight, run here: a host's facts, the listener and the connection."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

from torchrig import __version__
from torchrig.launch import network, probe
from torchrig.launch.network import Reach

PROBE = [sys.executable, "-m", "torchrig.launch.probe"]


def answer_of(*args: str) -> dict:
    """Run the probe with its stdin held open, as over SSH; its JSON line."""
    process = subprocess.Popen(
        [*PROBE, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        return json.loads(process.stdout.readline())
    finally:
        process.stdin.close()
        process.wait(timeout=30)


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


def test_the_listener_and_the_connection(tmp_path: Path) -> None:
    port = network.listen(0)
    number = port.getsockname()[1]
    port.close()
    endpoint = f"127.0.0.1:{number}"
    listener = subprocess.Popen(
        [*PROBE, "--cwd", str(tmp_path), "--endpoint", endpoint, "--listen"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        listened = json.loads(listener.stdout.readline())
        assert "listen_error" not in listened
        answer = answer_of("--cwd", str(tmp_path), "--endpoint", endpoint, "--connect-for", "5")
        assert answer["reach"] == [Reach.OPEN, "127.0.0.1"]
        # A second listener on the same port: what a busy rendezvous port looks like.
        busy = answer_of("--cwd", str(tmp_path), "--endpoint", endpoint, "--listen")
        assert busy["listen_error"] == "Address already in use"
    finally:
        listener.stdin.close()
        assert listener.wait(timeout=30) == 0
    # The listener is gone: a connection is refused, after trying for the time given.
    answer = answer_of("--cwd", str(tmp_path), "--endpoint", endpoint, "--connect-for", "0.5")
    assert answer["reach"][0] == Reach.REFUSED


def test_a_connecting_probe_gives_up_when_its_stdin_ends(tmp_path: Path) -> None:
    port = network.listen(0)
    number = port.getsockname()[1]
    port.close()
    answer = subprocess.run(
        [*PROBE, "--cwd", str(tmp_path), "--endpoint", f"127.0.0.1:{number}",
         "--connect-for", "60"],
        input="", capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert answer.returncode == 3 and answer.stdout == ""


def test_facts_name_the_login_shell_and_the_public_addresses(tmp_path: Path) -> None:
    facts = probe.facts(str(tmp_path), None)
    assert facts["login_shell"] == pwd.getpwuid(os.getuid()).pw_shell
    assert facts["public_addresses"] == network.public_addresses()
