from __future__ import annotations

import pytest
from torchrig.container.log import SetupError
from torchrig.container.settings import (
    parse_flag,
    parse_hostnames,
    parse_id,
    parse_services,
    read_settings,
)


def test_defaults_run_both_services_with_image_ids() -> None:
    settings = read_settings({})
    assert settings.services == ("jupyter", "sshd")
    assert settings.puid is None and settings.pgid is None
    assert not settings.grant_sudo and not settings.jupyter_allow_no_token
    assert settings.jupyter_token is None


def test_services_are_trimmed_deduplicated_and_ordered() -> None:
    assert parse_services(" sshd , Jupyter,sshd,") == ("sshd", "jupyter")
    assert parse_services("") == ()


def test_unknown_service_names_the_choices() -> None:
    with pytest.raises(SetupError, match=r"unknown service 'ssh'.*jupyter, sshd"):
        parse_services("jupyter,ssh")


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", str(2**31)])
def test_non_numeric_puid_is_refused(value: str) -> None:
    with pytest.raises(SetupError, match="PUID"):
        parse_id("PUID", value)


def test_empty_id_means_keep_the_image_default() -> None:
    assert parse_id("PGID", "") is None
    assert parse_id("PGID", " 1001 ") == 1001


@pytest.mark.parametrize(
    ("value", "expected"), [("1", True), ("yes", True), ("0", False), ("", False)]
)
def test_flags(value: str, expected: bool) -> None:
    assert parse_flag("GRANT_SUDO", value) is expected


def test_a_flag_typo_is_an_error_not_false() -> None:
    with pytest.raises(SetupError, match="GRANT_SUDO='ture'"):
        parse_flag("GRANT_SUDO", "ture")


def test_empty_token_without_opt_out_means_generate() -> None:
    settings = read_settings({"JUPYTER_TOKEN": ""})
    assert settings.jupyter_token is None and not settings.jupyter_allow_no_token


def test_opt_out_together_with_a_token_is_contradictory() -> None:
    with pytest.raises(SetupError, match="both set"):
        read_settings({"JUPYTER_TOKEN": "abc", "JUPYTER_ALLOW_NO_TOKEN": "1"})


def test_jupyter_hostnames_are_split_lowered_and_deduplicated() -> None:
    assert read_settings({}).jupyter_hostnames == ()
    value = " gpubox, GPUBox.lan  gpubox 10.0.0.5,"
    assert parse_hostnames("JUPYTER_HOSTNAMES", value) == ("gpubox", "gpubox.lan", "10.0.0.5")


@pytest.mark.parametrize(
    "value", ["http://gpubox", "gpubox:8888", "*.lan", "gpu_box", "-gpubox", "fe80::1"]
)
def test_a_jupyter_hostname_with_scheme_port_or_wildcard_is_refused(value: str) -> None:
    with pytest.raises(SetupError, match=r"JUPYTER_HOSTNAMES names .* not a host name.*no entry"):
        read_settings({"JUPYTER_HOSTNAMES": value})
