"""`make up`'s settings checked by name before anything starts (torchrig.host.settings): the names
come from the files that define them, and a misspelling is said with the name that was meant."""

from __future__ import annotations

from pathlib import Path

import pytest
from torchrig.host import settings
from torchrig.shared.voice import CannotGoOn

from .repo import REPO as REPO_ROOT

KNOWN = settings.known_names(REPO_ROOT)


def test_the_known_names_are_read_from_compose_the_makefile_and_the_host_helpers() -> None:
    # ${...} in docker-compose.yml, a bare environment name, a build arg, the Makefile's own,
    # and one only the host helpers read.
    for name in ("JUPYTER_PORT", "MEMLOCK", "PUID", "PYTORCH_VERSION", "CPU", "SHARE_GPUS"):
        assert name in KNOWN
    assert "JUPYTER_PROT" not in KNOWN


def test_a_name_only_in_an_extra_compose_file_is_known(tmp_path: Path) -> None:
    extra = tmp_path / "compose.mine.yml"
    extra.write_text("services:\n  workstation:\n    environment:\n      - MY_OWN_SETTING\n")
    assert "MY_OWN_SETTING" in settings.known_names(REPO_ROOT, [extra])


def test_make_s_command_line_variables_are_read_from_makeflags() -> None:
    assert settings.command_line_names(r"s -- X=a\ b JUPYTER_PROT=9999") == ["X", "JUPYTER_PROT"]
    assert settings.command_line_names("s") == []


def said_for(makeflags: str, env_file: dict[str, str] | None = None) -> list[str]:
    return settings.problems(KNOWN, makeflags, {Path(".env"): env_file or {}})


def test_a_misspelling_on_the_make_command_line_says_what_was_meant() -> None:
    (line,) = said_for("s -- JUPYTER_PROT=9999")
    assert "JUPYTER_PROT is not a setting of torchrig: did you mean JUPYTER_PORT?" in line


def test_an_unknown_name_on_the_command_line_is_refused_even_far_from_ours() -> None:
    (line,) = said_for("s -- WHATEVER=1")
    assert "WHATEVER is not a setting of torchrig (docs/workstation.md" in line


def test_lowercase_in_env_file_is_the_upper_case_name() -> None:
    (line,) = said_for("", {"jupyter_port": "9999", "COMPOSE_FILE": "x.yml"})
    assert line == ".env: jupyter_port is not a setting of torchrig: did you mean JUPYTER_PORT?"


def test_check_names_refuses_with_every_problem_in_one_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("PUID=1000\njupyter_port=9999\n")
    monkeypatch.setenv("MAKEFLAGS", "s -- SSH_PROT=1")
    with pytest.raises(CannotGoOn) as refused:
        settings.check_names(REPO_ROOT, env_file)
    text = "\n".join(refused.value.lines)
    assert "nothing was started or changed" in text
    assert "did you mean JUPYTER_PORT?" in text and "did you mean SSH_PORT?" in text
