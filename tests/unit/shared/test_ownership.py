"""PUID/PGID, parsed one way on both sides of Docker."""

from __future__ import annotations

import pytest
from torchrig.shared.ownership import MAX_ID, parse_id


@pytest.mark.parametrize("value", [None, "", "  "])
def test_unset_or_empty_means_keep_the_image_default(value: str | None) -> None:
    assert parse_id("PUID", value) is None


def test_a_number_is_read_with_surrounding_blanks_dropped() -> None:
    assert parse_id("PGID", " 1001 ") == 1001
    assert parse_id("PUID", str(MAX_ID)) == MAX_ID


@pytest.mark.parametrize("value", ["abc", "-1", "1.5", "0x10", str(MAX_ID + 1)])
def test_anything_else_names_the_variable_and_the_command_to_fix_it(value: str) -> None:
    with pytest.raises(ValueError, match=rf"^PUID={value!r} is not a numeric id: .*`id -u`"):
        parse_id("PUID", value)
    with pytest.raises(ValueError, match=r"`id -g` on the host"):
        parse_id("PGID", value)


# str.isdigit() is true for these, and int() even reads the full-width and Arabic-Indic ones;
# a Unicode digit is never what `id -u` printed.
@pytest.mark.parametrize("value", ["\u00b2", "\uff11\uff12\uff13\uff14", "\u0663\u0663", "1\u00b2"])
def test_only_ascii_digits_are_an_id(value: str) -> None:
    with pytest.raises(ValueError, match=rf"^PUID={value!r} is not a numeric id: .*`id -u`"):
        parse_id("PUID", value)
