"""The commands the docs give to run inside the workstation work from wherever a session starts
there: an SSH login starts in /home/dev, a Jupyter terminal in /workspace, so the example is named
by its path in the container, `/workspace/examples/train_ddp.py`, never relative to a folder
(the newcomer's `torchrig launch workspace/examples/train_ddp.py` over SSH: "no such file").
tests/container/test_ssh.py runs training.md's command over SSH."""

from __future__ import annotations

import json
import re

from .named_tests import REPO_ROOT

IN_THE_CONTAINER = "/workspace/examples/train_ddp.py"
# A command that runs a script: torchrun, `torchrig launch`, python (each followed by a space:
# launch's own message, "torchrig launch: ...", is no command); then the example's path.
RUNS_THE_EXAMPLE = re.compile(
    r"(?:torchrun|torchrig launch|python) [^`\n]*?(?<=\s)(\S*examples/train_ddp\.py)"
)
# Where the commands are meant for a session in the workstation (a Jupyter terminal or SSH).
INSIDE = (
    "README.md",
    "docs/training.md",
    "docs/workstation.md",
    "examples/train_ddp.py",
    "examples/train_ddp.ipynb",
)


def text_of(name: str) -> str:
    path = REPO_ROOT / name
    if path.suffix == ".ipynb":  # the cells' text, as Jupyter shows it
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return "\n".join("".join(cell["source"]) for cell in cells)
    return path.read_text(encoding="utf-8")


def example_paths(text: str) -> list[str]:
    return RUNS_THE_EXAMPLE.findall(text)


def test_the_pattern_finds_the_relative_path_the_newcomer_was_given() -> None:
    said = "torchrig launch workspace/examples/train_ddp.py --device cpu"
    assert example_paths(said) == ["workspace/examples/train_ddp.py"]


def test_every_command_inside_names_the_example_by_its_path_in_the_container() -> None:
    found = {name: example_paths(text_of(name)) for name in INSIDE}
    assert found["docs/training.md"], "training.md's commands were not found"
    wrong = {name: [p for p in paths if p != IN_THE_CONTAINER] for name, paths in found.items()}
    assert {name: paths for name, paths in wrong.items() if paths} == {}
