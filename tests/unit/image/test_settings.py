from __future__ import annotations

import re
from pathlib import Path

import pytest
from torchrig.image.settings import (
    STOP_GRACE_DEFAULT_S,
    SetupError,
    parse_flag,
    parse_hostnames,
    parse_id,
    parse_services,
    read_settings,
    stop_environment,
)

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_defaults_run_both_services_with_image_ids() -> None:
    settings = read_settings({})
    assert settings.services == ("jupyter", "sshd")
    assert settings.puid is None and settings.pgid is None
    assert not settings.grant_sudo and not settings.jupyter_allow_no_token
    assert settings.jupyter_token is None


@pytest.mark.parametrize("value", ["localhost", "::", "10.0.0.300", "0.0.0.0:8888"])
def test_a_bind_addr_that_is_not_an_ipv4_address_says_what_to_give(value: str) -> None:
    with pytest.raises(
        SetupError, match=rf"BIND_ADDR='{re.escape(value)}' is not an IPv4 address: give 127.0.0.1"
    ):
        read_settings({"BIND_ADDR": value})


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


def test_stop_grace_defaults_to_a_minute_and_takes_seconds() -> None:
    assert read_settings({}).stop_grace_s == STOP_GRACE_DEFAULT_S == 60.0
    assert read_settings({"STOP_GRACE": " 300 "}).stop_grace_s == 300.0
    assert read_settings({"STOP_GRACE": "0"}).stop_grace_s == 0.0
    assert read_settings({"STOP_GRACE": "2.5"}).stop_grace_s == 2.5


@pytest.mark.parametrize("value", ["1m", "-5", "nan", "inf", "ten"])
def test_a_bad_stop_grace_says_what_to_set(value: str) -> None:
    with pytest.raises(SetupError, match=rf"STOP_GRACE='{value}' is not a number of seconds"):
        read_settings({"STOP_GRACE": value})


def test_torchrun_waits_for_its_workers_as_long_as_the_container_does() -> None:
    settings = read_settings({"STOP_GRACE": "90.5"})
    assert stop_environment(settings, {}) == {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "91"}
    # The user's own choice stands.
    assert stop_environment(settings, {"TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "30"}) == {}


def test_compose_gives_docker_more_time_than_stop_grace_with_the_same_default() -> None:
    compose = (REPO_ROOT / "docker-compose.yml").read_text()
    # Go durations add up: "10s60s" is 70 s, so Docker waits STOP_GRACE plus 10 s.
    match = re.search(r"^\s*stop_grace_period: (\d+)s\$\{STOP_GRACE:-([\d.]+)\}s$", compose, re.M)
    assert match, "docker-compose.yml: stop_grace_period must be <margin>s${STOP_GRACE:-N}s"
    assert int(match.group(1)) >= 5
    assert float(match.group(2)) == STOP_GRACE_DEFAULT_S
    assert re.search(r"^\s*- STOP_GRACE$", compose, re.M), "STOP_GRACE is not passed in"


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


def test_home_is_read_once_here_and_absent_when_unset() -> None:
    assert read_settings({}).home is None
    assert read_settings({"HOME": "/home/other"}).home == Path("/home/other")
    with pytest.raises(SetupError, match=r"^HOME='\.' is not an absolute path"):
        read_settings({"HOME": "."})
