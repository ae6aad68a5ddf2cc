from __future__ import annotations

from pathlib import Path

import pytest
from torchrig.image import jupyter
from torchrig.image.settings import read_settings
from torchrig.image.state import TOKEN_FILE


def test_given_token_is_used_and_stored(tmp_path: Path) -> None:
    token = jupyter.resolve_token("abc123", False, tmp_path)
    assert (token.value, token.origin) == ("abc123", "JUPYTER_TOKEN")
    assert (tmp_path / TOKEN_FILE).read_text().strip() == "abc123"
    assert (tmp_path / TOKEN_FILE).stat().st_mode & 0o777 == 0o600


def test_a_generated_token_is_long_and_a_token_found_in_the_state_dir_is_never_reused(
    tmp_path: Path,
) -> None:
    """The token kept across restarts is the host's (`make up` hands it); one found in the state
    dir may be another user's choice (a temp dir they made first)."""
    (tmp_path / TOKEN_FILE).write_text("chosen-by-another-user\n")
    first = jupyter.resolve_token(None, False, tmp_path)
    assert first.origin == "generated" and len(first.value) >= 32
    assert first.value != "chosen-by-another-user"
    assert (tmp_path / TOKEN_FILE).read_text() == first.value + "\n"


def test_the_token_file_is_made_new_never_written_through_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("theirs\n")
    (tmp_path / TOKEN_FILE).symlink_to(target)
    jupyter.resolve_token("mine", False, tmp_path)
    assert target.read_text() == "theirs\n"
    assert not (tmp_path / TOKEN_FILE).is_symlink()
    assert (tmp_path / TOKEN_FILE).read_text() == "mine\n"


def test_no_token_only_on_opt_out(tmp_path: Path) -> None:
    assert jupyter.resolve_token(None, True, tmp_path).value == ""
    assert jupyter.resolve_token("", False, tmp_path).value != ""


def test_lab_url() -> None:
    assert jupyter.lab_url("127.0.0.1:8888", "t") == "http://127.0.0.1:8888/lab?token=t"
    assert jupyter.lab_url("127.0.0.1:8888", "") == "http://127.0.0.1:8888/lab"


def test_command_pins_the_contract() -> None:
    command = " ".join(jupyter.jupyter_command("127.0.0.1"))
    assert "--ServerApp.root_dir=/workspace" in command
    assert "--ServerApp.port=8888" in command and "--ServerApp.ip=127.0.0.1" in command
    assert "token" not in command  # the token travels in the environment, not in `ps`


def test_the_host_check_is_torchrigs_with_localhost_and_the_listed_names() -> None:
    command = jupyter.jupyter_command("0.0.0.0", ("gpubox", "gpubox.lan"))
    assert "--ServerApp.jpserver_extensions={'torchrig.jupyter.hosts': True}" in command
    # jupyter_server's own check (loopback addresses only) is replaced, not just dropped.
    assert "--ServerApp.allow_remote_access=True" in command
    # An extension that fails to load stops Jupyter, rather than leaving it without the check.
    assert "--ServerApp.reraise_server_extension_failures=True" in command
    names = [arg.partition("=")[2] for arg in command if "local_hostnames" in arg]
    assert names == ["localhost", "gpubox", "gpubox.lan"]


def test_the_host_check_extension_is_importable_by_jupyter() -> None:
    import importlib

    module = importlib.import_module(jupyter.HOST_CHECK_EXTENSION)
    assert module._jupyter_server_extension_points() == [{"module": jupyter.HOST_CHECK_EXTENSION}]


def test_environment_carries_the_token() -> None:
    token = jupyter.Token("xyz", "generated")
    assert jupyter.jupyter_environment({"PATH": "/x"}, token) == {
        "PATH": "/x",
        "JUPYTER_TOKEN": "xyz",
    }


def test_kernels_are_not_torchrun_workers() -> None:
    token = jupyter.Token("xyz", "generated")
    environ = {"PATH": "/x", "LOCAL_RANK": "0", "TORCHELASTIC_RUN_ID": "r", "WORLD_SIZE": "2"}
    assert jupyter.jupyter_environment(environ, token) == {"PATH": "/x", "JUPYTER_TOKEN": "xyz"}


def test_url_printer_maps_wildcard_binds_to_loopback() -> None:
    assert jupyter.browser_address("0.0.0.0:8899") == "127.0.0.1:8899"
    assert jupyter.browser_address("[::]:8899") == "127.0.0.1:8899"
    assert jupyter.browser_address("192.168.1.5:8888\n") == "192.168.1.5:8888"


def test_jupyter_opt_out_passes_an_empty_token_and_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = read_settings({"JUPYTER_ALLOW_NO_TOKEN": "1", "SERVICES": "jupyter"})
    argv, env = jupyter.prepare_jupyter(settings, tmp_path, {"PATH": "/usr/bin"})
    assert "--IdentityProvider.token=" in argv
    assert env == {"PATH": "/usr/bin", "JUPYTER_TOKEN": ""}
    assert "warning: Jupyter runs WITHOUT a token" in capsys.readouterr().err


@pytest.mark.parametrize("given", ["tok1234567890", None])
def test_the_jupyter_token_stays_out_of_the_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str | None
) -> None:
    # Log backends (journald, a log shipper) keep what the container prints.
    environ = {"SERVICES": "jupyter", **({"JUPYTER_TOKEN": given} if given else {})}
    argv, env = jupyter.prepare_jupyter(read_settings(environ), tmp_path, {})
    token = (tmp_path / TOKEN_FILE).read_text().strip()
    assert len(token) >= 12 and env["JUPYTER_TOKEN"] == token
    assert not any(token[:6] in part for part in argv)  # nor in `ps`
    err = capsys.readouterr().err
    assert token[:6] not in err
    assert "make jupyter-url" in err


def test_jupyter_answers_to_the_hostnames_the_user_listed(tmp_path: Path) -> None:
    settings = read_settings({"JUPYTER_HOSTNAMES": "gpubox", "SERVICES": "jupyter"})
    argv, _ = jupyter.prepare_jupyter(settings, tmp_path, {})
    assert "--ServerApp.local_hostnames=gpubox" in argv


def test_started_as_another_uid_the_start_says_how_to_reach_jupyter_without_make(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reach = jupyter.reach_note(tmp_path, "node07", "127.0.0.1")
    jupyter.prepare_jupyter(read_settings({"SERVICES": "jupyter"}), tmp_path, {}, reach)
    said = capsys.readouterr().err
    assert "make" not in said
    assert "it listens on 127.0.0.1:8888 of this machine (node07)" in said
    assert "ssh -L 8888:127.0.0.1:8888 node07" in said
    opened = jupyter.reach_note(tmp_path, "node07", "0.0.0.0")  # every interface: loopback too
    assert "open http://127.0.0.1:8888/lab there" in opened
    assert "ssh -L 8888:10.0.0.5:8888 node07" in jupyter.reach_note(tmp_path, "node07", "10.0.0.5")
    assert f"{tmp_path}/jupyter-token" in said
