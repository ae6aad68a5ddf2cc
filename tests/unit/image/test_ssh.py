from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import pytest
from torchrig.image import ssh
from torchrig.image.settings import SetupError
from torchrig.image.state import ENVIRONMENT_FILE


def fake_key(key_type: str = "ssh-ed25519", inner_type: str | None = None) -> str:
    inner = (inner_type or key_type).encode()
    blob = len(inner).to_bytes(4, "big") + inner + (32).to_bytes(4, "big") + b"k" * 32
    return f"{key_type} {base64.b64encode(blob).decode()} me@laptop"


def test_a_real_key_made_by_ssh_keygen_is_accepted(tmp_path: Path) -> None:
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen not installed")
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True
    )
    line = (tmp_path / "k.pub").read_text().strip()
    assert ssh.parse_keys(line) == [line]


def test_several_keys_by_newline_or_literal_backslash_n() -> None:
    one, two = fake_key(), fake_key("ssh-rsa")
    assert ssh.parse_keys(f"{one}\n\n# comment\n{two}\n") == [one, two]
    assert ssh.parse_keys(f"{one}\\n{two}") == [one, two]


@pytest.mark.parametrize("options", [
    'from="10.0.0.0/8",no-pty',
    'command="echo hi there",restrict',  # a quoted value may hold blanks
    'environment="A=\\"quoted\\"",No-Agent-Forwarding',  # escaped quotes; names ignore case
])  # fmt: skip
def test_authorized_keys_options_before_the_key_are_allowed(options: str) -> None:
    line = f"{options} {fake_key()}"
    assert ssh.parse_keys(line) == [line]


# sshd skips such a line without a word, so the login would just fail.
@pytest.mark.parametrize("prefix", ["hello", "my laptop:", "no-pty junk", 'from="10.0.0.1" x'])
def test_anything_else_before_the_key_type_is_refused(prefix: str) -> None:
    with pytest.raises(SetupError, match=r"^SSH_PUBLIC_KEY \(line 1\): .*before the key type"):
        ssh.parse_keys(f"{prefix} {fake_key()}")


PRIVATE_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"


@pytest.mark.parametrize("line", [
    PRIVATE_BODY,  # a line from the middle of a private key
    f"junk {PRIVATE_BODY} {fake_key()}",
    f"ssh-ed25519 {PRIVATE_BODY}",
    f"ssh-ed25519 {fake_key('ssh-rsa').split()[1]}",
])  # fmt: skip
def test_errors_never_echo_the_line(line: str) -> None:
    with pytest.raises(SetupError) as refused:
        ssh.parse_keys(line)
    message = str(refused.value)
    assert "\n" not in message
    for token in line.split():
        if token not in ssh.KEY_TYPES:
            assert token[:8] not in message, message


@pytest.mark.parametrize(("text", "message"), [
    ("hello world", "not an SSH public key"),
    ("ssh-ed25519", "has no key data"),
    ("ssh-ed25519 not-base64!! me", "not valid base64"),
    ("ssh-ed25519 QUJD me", "not valid base64"),  # decodes, but is not SSH wire format
    (fake_key("ssh-ed25519", inner_type="ssh-rsa"), "its data is a ssh-rsa key"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----", "PRIVATE key"),
])  # fmt: skip
def test_malformed_keys_are_clear_errors(text: str, message: str) -> None:
    with pytest.raises(SetupError, match=message):
        ssh.parse_keys(text)


def test_error_names_the_line() -> None:
    with pytest.raises(SetupError, match=r"SSH_PUBLIC_KEY \(line 2\)"):
        ssh.parse_keys(f"{fake_key()}\nssh-rsa AAAA")


def test_a_key_given_twice_is_installed_once() -> None:
    one, two = fake_key(), fake_key("ecdsa-sha2-nistp256")
    assert ssh.parse_keys(f"{one}\n{two}\n{one}") == [one, two]


def test_authorized_keys_is_private(tmp_path: Path) -> None:
    path = ssh.install_authorized_keys([fake_key()], tmp_path)
    assert path == tmp_path / ".ssh" / "authorized_keys"
    assert path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / ".ssh").stat().st_mode & 0o777 == 0o700
    assert path.read_text() == fake_key() + "\n"


def test_host_keys_are_made_once(tmp_path: Path) -> None:
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen not installed")
    made = ssh.ensure_host_keys(tmp_path)
    assert sorted(p.name for p in made) == ["ssh_host_ecdsa_key", "ssh_host_ed25519_key"]
    before = (tmp_path / "ssh_host_ed25519_key").read_bytes()
    assert ssh.ensure_host_keys(tmp_path) == []
    assert (tmp_path / "ssh_host_ed25519_key").read_bytes() == before


def test_exported_environment_drops_per_login_secret_and_multiline_values() -> None:
    env = {
        "PATH": "/opt/venv/bin:/usr/bin",
        "NCCL_DEBUG": "INFO",
        "HOME": "/root",
        "JUPYTER_TOKEN": "secret",
        "SSH_PUBLIC_KEY": "ssh-ed25519 AAA",
        "MULTI": "a\nb",
        "odd-name": "x",
    }
    assert ssh.exported_environment(env) == {"NCCL_DEBUG": "INFO", "PATH": "/opt/venv/bin:/usr/bin"}


def test_shell_exports_survive_spaces_and_quotes() -> None:
    text = ssh.shell_exports_text({"A": "it's a value", "PATH": "/opt/venv/bin:/usr/bin"})
    out = subprocess.run(
        ["sh", "-c", text + 'printf "%s|%s" "$A" "$PATH"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out == "it's a value|/opt/venv/bin:/usr/bin"


def test_ssh_environment_is_literal_name_value_lines() -> None:
    assert ssh.ssh_environment_text({"A": "x y", "B": "1"}) == "A=x y\nB=1\n"


def test_exported_environment_leaves_out_secret_looking_names() -> None:
    env = {
        "HF_TOKEN": "hf_x",
        "GITHUB_TOKEN_FILE_PATH": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "client_secret": "x",
        "WANDB_API_KEY": "x",
        "DB_PASSWORD": "x",
        "KEYBOARD_LAYOUT": "us",  # KEY, but not *_KEY
        "NCCL_DEBUG": "INFO",
    }
    assert ssh.exported_environment(env) == {"KEYBOARD_LAYOUT": "us", "NCCL_DEBUG": "INFO"}


def test_exported_environment_takes_only_names_a_posix_shell_accepts() -> None:
    # Non-ASCII letters pass str.isidentifier(), but `export` in sh refuses them and the whole
    # login shell's profile stops there.
    env = {"\u00c9T\u00c9": "x", "\u0394": "x", "_OK1": "y", "1BAD": "z"}
    exported = ssh.exported_environment(env)
    assert exported == {"_OK1": "y"}
    out = subprocess.run(
        ["sh", "-c", ssh.shell_exports_text(exported) + 'echo "$_OK1"'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == "y\n"


def test_torchruns_per_rank_variables_never_reach_a_session() -> None:
    """A container a scheduler started with them (or one started from inside a worker) must not
    make every command typed over SSH look like a torchrun worker to accelerate or Lightning."""
    env = {
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "8",
        "MASTER_ADDR": "job-0",
        "MASTER_PORT": "29500",
        "TORCHELASTIC_RUN_ID": "r1",
        "TORCHELASTIC_RESTART_COUNT": "0",
        "PET_NNODES": "2",  # torchrun's own input, for the next torchrun typed here: kept
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
    }
    assert ssh.exported_environment(env) == {
        "PET_NNODES": "2",
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
    }


def test_no_key_skips_sshd_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ssh.prepare_sshd([], tmp_path) is False
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sshd not started: no SSH public key" in err
    assert "set SSH_PUBLIC_KEY" in err


def test_a_host_key_volume_dev_cannot_write_stops_the_start_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unwritable() -> list[Path]:
        raise PermissionError(13, "Permission denied", str(ssh.HOST_KEY_DIR))

    monkeypatch.setattr(ssh, "ensure_host_keys", unwritable)
    with pytest.raises(SetupError, match=r"SSH set-up failed .*must be writable for dev"):
        ssh.prepare_sshd([fake_key()], tmp_path)


def test_with_a_key_sshd_gets_host_keys_and_authorized_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(ssh, "ensure_host_keys", lambda: [tmp_path / "ssh_host_ed25519_key"])
    assert ssh.prepare_sshd([fake_key()], tmp_path) is True
    assert (tmp_path / ".ssh" / "authorized_keys").read_text() == fake_key() + "\n"
    err = capsys.readouterr().err
    assert "made SSH host keys in" in err
    assert "sshd: 1 authorized key(s) installed in" in err


def test_the_exported_environment_is_private_to_dev(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHRIG_TEST_VARIABLE", "x")
    ssh.export_environment(tmp_path / "home", tmp_path)
    for path in (tmp_path / ENVIRONMENT_FILE, tmp_path / "home" / ".ssh" / "environment"):
        assert "TORCHRIG_TEST_VARIABLE=" in path.read_text()
        assert path.stat().st_mode & 0o777 == 0o600, path
