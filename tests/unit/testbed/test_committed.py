"""What the host runs of `workspace/` is git's copy: a line dev adds to the example (the container
writes ./workspace) never runs on the host, in `make gpu-report` or `make test`."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import gpu_report
from testbed import committed

REPO_ROOT = Path(__file__).resolve().parents[3]


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A checkout whose example prints a line, as committed."""
    root = tmp_path / "checkout"
    example = root / "workspace" / "examples" / "train_ddp.py"
    example.parent.mkdir(parents=True)
    example.write_text("print('the committed example')\n")
    git(root.parent, "init", "-q", str(root))
    git(root, "add", "workspace")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "example")
    return root


def test_a_line_dev_adds_to_the_example_does_not_run_on_the_host(
    checkout: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran-on-the-host"
    example = checkout / "workspace" / "examples" / "train_ddp.py"
    example.write_text(f"open({str(marker)!r}, 'w').close()\n" + example.read_text())
    copy = committed.example(checkout)
    ran = subprocess.run([sys.executable, copy], capture_output=True, text=True, check=True)
    assert ran.stdout == "the committed example\n"
    assert not marker.exists()
    assert Path(copy).parent.parent.parent.stat().st_mode & 0o777 == 0o700
    assert capsys.readouterr().err == (
        "note: ran git's copy of workspace/, not your edits to workspace/examples/train_ddp.py "
        "(the container writes that folder, so the host never runs it; `git add` an edit to "
        "run it)\n"
    )


def test_a_copy_without_git_runs_its_folder_as_it_is_and_says_so(
    checkout: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A release archive, or the tree copied to a GPU machine (no container runs there)."""
    bare = checkout.parent / "no-git"
    (bare / "workspace" / "examples").mkdir(parents=True)
    source = checkout / "workspace" / "examples" / "train_ddp.py"
    (bare / "workspace" / "examples" / "train_ddp.py").write_bytes(source.read_bytes())
    assert committed.example(bare) == str(bare / "workspace" / "examples" / "train_ddp.py")
    assert "is not a git checkout: running workspace/ as it is" in capsys.readouterr().err


def test_every_host_side_caller_runs_the_committed_example() -> None:
    """`make gpu-report` (its resume part, and the throughput script it runs) and `make test`
    (the example's runs and the notebook)."""
    private = Path(committed.committed_workspace())
    from tests.integration.examples import runs, test_notebook

    throughput = runpy.run_path(str(REPO_ROOT / "benchmarks" / "train_throughput.py"))
    for path in (runs.EXAMPLE, test_notebook.NOTEBOOK):
        assert Path(path).is_relative_to(private), path
    assert not Path(throughput["EXAMPLE"]).is_relative_to(REPO_ROOT / "workspace")
    for module in Path(gpu_report.__file__).parent.glob("*.py"):
        assert "workspace/examples" not in module.read_text(), module
