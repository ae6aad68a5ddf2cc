from __future__ import annotations

from pathlib import Path

from torchrig.image import jupyter, jupyter_url
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
    command = " ".join(jupyter.jupyter_command())
    assert "--ServerApp.root_dir=/workspace" in command
    assert "--ServerApp.port=8888" in command and "--ServerApp.ip=0.0.0.0" in command
    assert "token" not in command  # the token travels in the environment, not in `ps`


def test_the_host_check_is_torchrigs_with_localhost_and_the_listed_names() -> None:
    command = jupyter.jupyter_command(("gpubox", "gpubox.lan"))
    assert "--ServerApp.jpserver_extensions={'torchrig.image.jupyter_hosts': True}" in command
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
    assert jupyter_url.browser_address("0.0.0.0:8899") == "127.0.0.1:8899"
    assert jupyter_url.browser_address("[::]:8899") == "127.0.0.1:8899"
    assert jupyter_url.browser_address("192.168.1.5:8888\n") == "192.168.1.5:8888"
