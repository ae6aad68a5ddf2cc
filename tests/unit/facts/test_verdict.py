"""The verdict type: a WARN or FAIL carries its fix; sections are the report's."""

from __future__ import annotations

import pytest
from torchrig.facts.verdict import Check, Verdict, failed, passed, skipped, warned


def test_a_check_that_is_not_pass_must_carry_a_fix() -> None:
    with pytest.raises(ValueError, match="needs a fix"):
        Check("runtime", "x", Verdict.WARN, "no fix given")


def test_an_unknown_section_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown section 'banner'"):
        Check("banner", "x", Verdict.PASS, "fine")


def test_only_warn_and_fail_are_trouble() -> None:
    assert warned("runtime", "x", "s", "f").troubled
    assert failed("runtime", "x", "s", "f").troubled
    assert not passed("runtime", "x", "s").troubled
    assert not skipped("runtime", "x", "s").troubled
