"""Byte sizes written for a person: the largest unit a size reaches, bytes always whole."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from torchrig import sizes
from torchrig.sizes import GIB, KIB, MIB, size_figure, size_text


def test_the_units_are_binary() -> None:
    assert (KIB, MIB, GIB) == (2**10, 2**20, 2**30)


def test_the_module_imports_nothing_so_any_part_may_ask_it() -> None:
    tree = ast.parse(Path(sizes.__file__).read_text())
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert [node.module for node in imports if isinstance(node, ast.ImportFrom)] == ["__future__"]
    assert len(imports) == 1


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1536, "1.5 KiB"),
        (64 * MIB, "64.0 MiB"),
        (int(79.6 * GIB), "79.6 GiB"),
        (5000 * GIB, "5000.0 GiB"),  # GiB is the largest unit
    ],
)
def test_a_size_is_written_in_the_largest_unit_it_reaches(size: int, text: str) -> None:
    assert size_text(size) == text


def test_exact_sizes_are_written_with_as_few_digits_as_they_take() -> None:
    assert [size_text(size, digits=None) for size in (4 * KIB, 512 * MIB, 3 * MIB // 2)] == [
        "4 KiB",
        "512 MiB",
        "1.5 MiB",
    ]


def test_a_size_may_be_written_in_a_unit_of_its_own_and_as_a_bare_figure() -> None:
    assert size_text(int(79.6 * GIB), digits=0, unit="GiB") == "80 GiB"
    assert size_text(943_718, unit="MiB") == "0.9 MiB"
    assert size_figure(40 * GIB, "GiB") == "40.0"
    with pytest.raises(KeyError):
        size_text(1, unit="GB")  # decimal units are not byte sizes here
