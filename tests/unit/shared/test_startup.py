"""The status protocol's two sides ask and answer the same thing: the command the host runs is
the one root_main answers, from where the image puts it; the record is where the start keeps it."""

from __future__ import annotations

import re
from pathlib import Path

from torchrig.host import up
from torchrig.image import endpoints, root_main, state
from torchrig.shared import startup

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_the_host_asks_what_root_main_answers_where_the_image_puts_it() -> None:
    python, *flags, package, command = startup.ASK
    assert up.ask_container("c1") == ["exec", "--user", "root", "c1", *startup.ASK]
    assert command in root_main.USAGE and flags == ["-I", "-S"]
    dockerfile = (REPO_ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert f'CMD ["{python}", "-I", "-S", "{package}", "healthcheck"]' in dockerfile
    assert re.search(rf"install -d -o dev -g dev -m \d+ .*{startup.STATE_DIR}\b", dockerfile)


def test_both_sides_read_the_words_and_the_record_from_one_place() -> None:
    assert endpoints.STATUS is startup.STATUS and endpoints.Answer is startup.Answer
    assert Path(startup.STATE_DIR) == state.STATE_DIR
    # The record is root's: in /run, which dev may not write (its state dir is in there).
    assert Path(startup.START_ERROR).parent == Path(startup.STATE_DIR).parent == Path("/run")
    assert {int(answer) for answer in startup.Answer} == {0, 3, 4}  # the exit codes stay
