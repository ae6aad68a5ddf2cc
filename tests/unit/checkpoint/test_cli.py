"""`torchrig ckpt ls | export`, driven through the module's own parser."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
from torchrig.checkpoint import CheckpointManager, TrainingState
from torchrig.checkpoint import cli as ckpt_cli

from ...checkpoint_support import Position, TinyNet, ckpt


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    model = torch.nn.DataParallel(TinyNet())  # saved prefix-free all the same
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    state = TrainingState(
        model, optimizer, sampler=Position(7), config={"lr": 0.1, "model": "tiny"}
    )
    manager = CheckpointManager(tmp_path / "run")
    for step in (100, 200):
        state.epoch = step // 100
        manager.save(step, state)
    return tmp_path / "run"


@pytest.fixture
def sharded_dir(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    model = TinyNet()
    state = TrainingState(model, torch.optim.AdamW(model.parameters()), config={"lr": 0.01})
    manager = CheckpointManager(tmp_path / "sharded", layout="sharded")
    for step in (1, 2):
        manager.save(step, state)
    return tmp_path / "sharded"


def test_ls_lists_steps_sizes_latest(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ckpt("ls", run_dir) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["STEP", "FILE", "SIZE", "LATEST", "STATUS"]
    assert lines[1].split()[:2] == ["100", "step_00000100.pt"]
    assert lines[1].split()[-1] == "ok" and "*" not in lines[1]
    assert lines[2].split()[:2] == ["200", "step_00000200.pt"]
    assert "*" in lines[2].split() and lines[2].endswith("ok")


@pytest.mark.parametrize("verify", [False, True])
def test_ls_marks_corrupt_files(
    run_dir: Path, capsys: pytest.CaptureFixture[str], verify: bool
) -> None:
    path = run_dir / "step_00000200.pt"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 100])
    assert ckpt("ls", run_dir, *(["--verify"] if verify else [])) == 2
    out = capsys.readouterr().out
    assert "corrupt" in out.splitlines()[2] and out.splitlines()[1].endswith("ok")


def test_what_a_checkpoint_names_reaches_the_terminal_without_its_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its writer chose the names in a folder's metadata: root lists it, and the reason it is
    bad names what the metadata refers to."""
    folder = tmp_path / "run" / "step_00000001"
    folder.mkdir(parents=True)
    name = "one\x1b]52;c;cHduZWQ=\x07\x1b[2J"
    (folder / ".metadata").write_bytes(f"cpathlib\n{name}\n.".encode())
    assert ckpt("ls", tmp_path / "run") == 2
    out = capsys.readouterr().out
    assert "refers to pathlib.one, " in out and "\x1b" not in out


def test_export_writes_plain_prefix_free_weights(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "model.pt"
    assert ckpt("export", run_dir, out) == 0
    weights = torch.load(out, weights_only=True)
    model = TinyNet()
    model.load_state_dict(weights)  # strict: every key, no `module.`
    saved = torch.load(run_dir / "step_00000200.pt", weights_only=True)["model"]
    assert all(torch.equal(weights[k], v) for k, v in saved.items())
    assert "wrote" in capsys.readouterr().out
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_export_refuses_to_overwrite_without_force(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "model.pt"
    out.write_bytes(b"precious")
    assert ckpt("export", run_dir, out) == 1
    assert "--force" in capsys.readouterr().err
    assert out.read_bytes() == b"precious"
    assert ckpt("export", run_dir, out, "--force") == 0
    assert set(torch.load(out, weights_only=True)) == set(TinyNet().state_dict())


def test_export_skips_corrupt_latest(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run_dir / "step_00000200.pt").write_bytes(b"\0" * 64)
    assert ckpt("export", run_dir, tmp_path / "m.pt") == 0
    assert "step_00000200.pt" in capsys.readouterr().err
    saved = torch.load(run_dir / "step_00000100.pt", weights_only=True)["model"]
    exported = torch.load(tmp_path / "m.pt", weights_only=True)
    assert all(torch.equal(exported[k], v) for k, v in saved.items())


def test_sharded_folders_list_and_export(
    sharded_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Multi-rank FSDP2 folders, with a damaged one: tests/integration/checkpoint.
    assert ckpt("ls", sharded_dir) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:2] == ["1", "step_00000001/"] and lines[1].endswith("ok")
    assert "*" in lines[2].split() and lines[2].endswith("ok")
    out = tmp_path / "model.pt"
    assert ckpt("export", sharded_dir, out) == 0
    TinyNet().load_state_dict(torch.load(out, weights_only=True))  # strict: every key


def test_export_of_a_view_writes_only_its_bytes(tmp_path: Path) -> None:
    big = torch.zeros(1000, 1000)
    view = {"format": "torchrig-checkpoint/1", "model": {"w": big[:2]}}  # into a 4 MB storage
    torch.save(view, tmp_path / "step_00000001.pt")
    assert ckpt("export", tmp_path / "step_00000001.pt", tmp_path / "small.pt") == 0
    assert (tmp_path / "small.pt").stat().st_size < 10_000


@pytest.mark.parametrize(
    "argv, message",
    [
        (["ls", "{tmp}/absent"], "no such directory"),
        (["ls", "{tmp}/file.txt"], "not a directory"),
        (["ls", "{tmp}/empty"], "no checkpoints"),
        (["export", "{tmp}/empty", "{tmp}/out.pt"], "no good checkpoint"),
        (["export", "{tmp}/absent", "{tmp}/out.pt"], "no such file"),
        (["export", "{tmp}/file.txt", "{tmp}/out.pt"], "not a torch.save file"),
        (["export", "{tmp}/empty", "{tmp}/nodir/out.pt"], "no such directory"),
    ],
)
def test_bad_input_is_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("not a checkpoint")
    assert ckpt(*[a.format(tmp=tmp_path) for a in argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("torchrig ckpt: ") and message in err
    assert "Traceback" not in err
    assert not (tmp_path / "out.pt").exists()


def test_cli_module_imports_only_the_standard_library() -> None:
    source = Path(ckpt_cli.__file__).read_text()
    top_level = [
        node for node in ast.parse(source).body if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    names = {
        (node.module if isinstance(node, ast.ImportFrom) else node.names[0].name) or ""
        for node in top_level
    }
    assert not any(name.split(".")[0] in {"torch", "numpy"} for name in names), names
    # All standard library only (torchrig.shared.voice imports nothing at all).
    allowed = {"torchrig.checkpoint", "torchrig.shared", "torchrig.shared.voice"}
    assert {n for n in names if n.startswith("torchrig")} <= allowed


def test_importing_the_package_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, torchrig.checkpoint, torchrig.checkpoint.cli; "
        "sys.exit(1 if 'torch' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
