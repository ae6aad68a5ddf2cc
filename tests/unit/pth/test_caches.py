from __future__ import annotations

from pathlib import Path

import pytest
from torchrig.pth import caches


def test_the_caches_follow_xdg_cache_home_then_home() -> None:
    assert caches.cache_home({"HOME": "/u", "XDG_CACHE_HOME": "/x"}) == "/x"
    assert caches.cache_home({"HOME": "/u", "XDG_CACHE_HOME": "relative"}) == "/u/.cache"
    assert caches.cache_home({"HOME": "/u"}) == "/u/.cache"
    # Docker's HOME for a uid without a passwd entry is /: no home at all.
    assert caches.cache_home({"HOME": "/"}) is None
    assert caches.cache_home({}) is None


def test_every_cache_is_named_in_the_users_own_cache_home(tmp_path: Path) -> None:
    found = caches.user_cache_environment({"HOME": str(tmp_path)})
    assert found == {
        "TORCHINDUCTOR_CACHE_DIR": f"{tmp_path}/.cache/torchinductor",
        "TRITON_CACHE_DIR": f"{tmp_path}/.cache/triton",
        "HF_HOME": f"{tmp_path}/.cache/huggingface",
    }


def test_a_cache_the_user_named_is_left_as_it_is(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path), "HF_HOME": "/models"}
    caches.follow_user(environ)
    assert environ["HF_HOME"] == "/models"
    assert environ["TORCHINDUCTOR_CACHE_DIR"] == f"{tmp_path}/.cache/torchinductor"


def test_a_home_that_cannot_be_written_names_no_cache_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    # As a read-only bind would answer (root, who runs the tests in CI, writes to any mode).
    monkeypatch.setattr(caches.os, "access", lambda path, mode: not str(path).startswith(str(home)))
    environ = {"HOME": str(home)}
    assert caches.user_cache_environment(environ, euid=4242) == {}
    problem = caches.home_problem(environ, 4242)
    assert problem is not None and f"{home}/.cache is not writable for uid 4242" in problem


def test_a_missing_home_is_said_with_the_way_to_give_one() -> None:
    for environ in ({}, {"HOME": "/"}):
        problem = caches.home_problem(environ, 4242)
        assert problem is not None and "no home to write to" in problem
        assert "--home" in problem and "/tmp" in problem
    # With XDG_CACHE_HOME the caches still have a place: only pip's user site is lost.
    problem = caches.home_problem({"XDG_CACHE_HOME": "/x"}, 4242) or ""
    assert "pip install --user" in problem and "/tmp" not in problem


def test_a_home_not_made_yet_is_writable_when_the_folder_above_it_is(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path / "not-yet")}
    assert caches.home_problem(environ, 4242) is None
    assert caches.user_cache_environment(environ)["TRITON_CACHE_DIR"].startswith(str(tmp_path))


def test_root_keeps_its_own_cache_home_even_when_it_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(caches.os, "access", lambda path, mode: False)
    environ = {"HOME": "/root"}
    assert caches.user_cache_environment(environ, euid=0)["TORCHINDUCTOR_CACHE_DIR"] == (
        "/root/.cache/torchinductor"
    )
    assert caches.user_cache_environment(environ, euid=4242) == {}
