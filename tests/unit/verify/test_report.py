"""The report's two renderings: one JSON document, and the table for people."""

from __future__ import annotations

import io
import json

from torchrig.facts.verdict import Check, Verdict
from torchrig.verify import report
from torchrig.verify.report import SCHEMA, Report


def sample_report() -> Report:
    result = Report(mode="gpu", options={"quick": True})
    result.add(
        Check("software", "torch", Verdict.PASS, "torch 2.13.0"),
        Check("runtime", "/dev/shm", Verdict.FAIL, "64 MiB", "raise shm_size"),
    )
    return result


def test_the_json_document_has_every_check_and_the_schema() -> None:
    document = json.loads(report.render_json(sample_report()))
    assert document["schema"] == SCHEMA
    assert document["exit_code"] == 1
    assert document["summary"] == {"pass": 1, "warn": 0, "fail": 1, "skip": 0}
    assert document["checks"][1] == {
        "section": "runtime",
        "name": "/dev/shm",
        "verdict": "FAIL",
        "summary": "64 MiB",
        "fix": "raise shm_size",
        "data": {},
    }


def test_text_shows_the_fix_under_a_failing_row_without_colour() -> None:
    text = report.render_text(sample_report(), colour=False)
    assert "\033[" not in text
    assert "FAIL  /dev/shm" in text
    assert "fix: raise shm_size" in text
    assert text.splitlines()[-1] == "1 pass, 0 warn, 1 fail, 0 skipped in 0.0 s; exit 1"


def test_colour_only_on_a_terminal_and_never_with_no_color() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert report.use_colour(Terminal(), {})
    assert not report.use_colour(Terminal(), {"NO_COLOR": "1"})
    assert not report.use_colour(io.StringIO(), {})
    assert "\033[31mFAIL" in report.render_text(sample_report(), colour=True)


def test_the_all_reduce_sweep_is_printed_under_its_row() -> None:
    result = Report(mode="cpu", options={})
    sweep = [
        {"bytes": 4096, "time_us": 10.0, "algbw_gbps": 0.4, "busbw_gbps": 0.4, "correct": True}
    ]
    result.add(Check("collectives", "all-reduce", Verdict.PASS, "ok", data={"sweep": sweep}))
    text = report.render_text(result)
    assert "busbw GB/s" in text
    assert "4 KiB" in text
