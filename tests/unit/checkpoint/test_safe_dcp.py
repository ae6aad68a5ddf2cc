"""Sharded step folders cannot run code: a crafted `.metadata` or non-tensor value is refused by
`torchrig ckpt ls/export` and by a resume, and the code in it never runs."""

from __future__ import annotations

import dataclasses
import io
import pickle
import pickletools
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import pytest
import torch
from torch.distributed.checkpoint.metadata import Metadata
from torchrig.checkpoint import (
    CheckpointError,
    CheckpointManager,
    CheckpointWarning,
    TrainingState,
    load_model_weights,
    safe_dcp,
)

from ...checkpoint_support import TinyNet, ckpt


class _TouchOnUnpickle:
    """Unpickling this creates `marker`: what a crafted checkpoint would do with os.system."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (Path.touch, (self.marker,))


def saved_folder(tmp_path: Path, model: torch.nn.Module | None = None) -> Path:
    torch.manual_seed(0)
    model = model or TinyNet()
    state = TrainingState(model, torch.optim.SGD(model.parameters(), lr=0.1))
    CheckpointManager(tmp_path / "run", layout="sharded").save(1, state)
    return tmp_path / "run"


@pytest.fixture
def crafted_metadata(tmp_path: Path) -> tuple[Path, Path]:
    """A run whose only step folder's `.metadata` creates a marker file when unpickled."""
    run = saved_folder(tmp_path)
    marker = tmp_path / "code-ran"
    (run / "step_00000001" / ".metadata").write_bytes(pickle.dumps(_TouchOnUnpickle(marker)))
    return run, marker


def test_ls_reports_crafted_metadata_as_bad_without_running_it(
    crafted_metadata: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run, marker = crafted_metadata
    assert ckpt("ls", run) == 2
    assert ckpt("ls", run, "--verify") == 2
    assert not marker.exists()
    assert "refers to pathlib.Path.touch" in capsys.readouterr().out


def test_export_refuses_crafted_metadata(
    crafted_metadata: tuple[Path, Path], tmp_path: Path
) -> None:
    run, marker = crafted_metadata
    assert ckpt("export", run, tmp_path / "out.pt") == 1
    assert ckpt("export", run / "step_00000001", tmp_path / "out.pt") == 1
    assert not marker.exists() and not (tmp_path / "out.pt").exists()


def test_resume_skips_crafted_metadata(crafted_metadata: tuple[Path, Path]) -> None:
    run, marker = crafted_metadata
    model = TinyNet()
    state = TrainingState(model, torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.warns(CheckpointWarning, match="refused unread"):
        assert CheckpointManager(run).load_latest(state) is None
    assert not marker.exists()


class WithExtraState(TinyNet):
    """A module whose state_dict holds a non-tensor value: DCP stores it as pickled bytes."""

    def __init__(self, extra: object = None) -> None:
        super().__init__()
        self.extra = extra

    def get_extra_state(self) -> object:
        return self.extra

    def set_extra_state(self, state: object) -> None:
        self.extra = state


def test_a_crafted_non_tensor_value_is_refused_on_resume_and_export(tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    run = saved_folder(tmp_path, WithExtraState(_TouchOnUnpickle(marker)))
    marker.unlink(missing_ok=True)  # saving pickled it; only a load may not run it
    model = WithExtraState()
    state = TrainingState(model, torch.optim.SGD(model.parameters(), lr=0.1))
    refused = r"extra_state: torch.load\(weights_only=True\) refuses"
    with pytest.raises(CheckpointError, match=f"could be loaded.*{refused}"):
        CheckpointManager(run).load_latest(state)
    assert ckpt("export", run, tmp_path / "out.pt") == 1
    assert not marker.exists()


def test_plain_extra_state_still_resumes(tmp_path: Path) -> None:
    run = saved_folder(tmp_path, WithExtraState("plain values load"))
    model = WithExtraState("")
    state = TrainingState(model, torch.optim.SGD(model.parameters(), lr=0.1))
    assert CheckpointManager(run).load_latest(state) is not None
    assert model.extra == "plain values load"
    assert load_model_weights(run)["_extra_state"] == "plain values load"


# --- metadata that patches a class (BUILD on an allowed class) ----------------------------------

PATCH = "torchrig_test_patched"


def class_patching_prefix(module: str = "pathlib", name: str = "PurePosixPath") -> bytes:
    """Pickle opcodes that set an attribute on an allowed *class*, then drop it from the stack:
    put before genuine metadata, the checkpoint still unpickles to a valid Metadata."""
    key = PATCH.encode()
    return (
        b"c" + module.encode() + b"\n" + name.encode() + b"\n"  # GLOBAL: the class itself
        + b"N"  # no __dict__ state (a class's __dict__ is read-only)...
        + b"}X" + len(key).to_bytes(4, "little") + key + b"\x88s"  # ...and {PATCH: True}
        + b"\x86"  # (None, {...}): "slot state", which BUILD applies with setattr
        + b"b"  # BUILD
        + b"0"  # POP: what follows is the genuine metadata
    )  # fmt: skip


@pytest.fixture
def class_patching_run(tmp_path: Path) -> Iterator[Path]:
    """A run with a good step 1 and a step 2 whose `.metadata` patches PurePosixPath."""
    torch.manual_seed(0)
    model = TinyNet()
    state = TrainingState(model, torch.optim.SGD(model.parameters(), lr=0.1))
    manager = CheckpointManager(tmp_path / "run", layout="sharded")
    manager.save(1, state)
    manager.save(2, state)
    metadata = tmp_path / "run" / "step_00000002" / ".metadata"
    metadata.write_bytes(class_patching_prefix() + metadata.read_bytes())
    yield tmp_path / "run"
    patched = PATCH in vars(PurePosixPath)
    if patched:
        delattr(PurePosixPath, PATCH)  # never leave the patch to the rest of the session
    assert not patched, "the crafted metadata patched PurePosixPath"


def test_the_class_patching_metadata_works_against_a_find_class_only_unpickler(
    class_patching_run: Path,
) -> None:
    # The attack is real: the allow-list of find_class alone lets the metadata through, valid,
    # and the class patched for the whole process.
    class FindClassOnly(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> object:
            return safe_dcp.allowed_global(module, name)

    crafted = (class_patching_run / "step_00000002" / ".metadata").read_bytes()
    try:
        assert isinstance(FindClassOnly(io.BytesIO(crafted)).load(), Metadata)
        assert getattr(PurePosixPath, PATCH) is True
    finally:
        delattr(PurePosixPath, PATCH)


def test_metadata_that_sets_attributes_of_an_allowed_class_is_refused_and_the_class_unchanged(
    class_patching_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ckpt("ls", class_patching_run) == 2
    assert "sets attributes of the class PurePosixPath" in capsys.readouterr().out
    assert PATCH not in vars(PurePosixPath)


def test_resume_falls_back_past_class_patching_metadata_with_the_class_unchanged(
    class_patching_run: Path,
) -> None:
    model = TinyNet()
    state = TrainingState(model, torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.warns(CheckpointWarning, match=r"step_00000002.*sets attributes of the class"):
        resumed = CheckpointManager(class_patching_run).load_latest(state)
    assert resumed is not None and resumed["step"] == 1
    assert PATCH not in vars(PurePosixPath)


def test_build_on_instances_of_allowed_classes_still_loads(tmp_path: Path) -> None:
    run = saved_folder(tmp_path)
    raw = (run / "step_00000001" / ".metadata").read_bytes()
    assert any(op.name == "BUILD" for op, _, _ in pickletools.genops(raw))  # DCP's dataclasses
    metadata = safe_dcp.MetadataUnpickler(io.BytesIO(raw)).load()
    assert metadata.state_dict_metadata.keys() == pickle.loads(raw).state_dict_metadata.keys()


# --- metadata that points at another folder's shards ---------------------------------------------


def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Another run's folder ("theirs", other weights) and ours, with steps 1 and 2."""
    for name, seed in (("theirs", 1), ("ours", 0)):
        torch.manual_seed(seed)
        model = TinyNet()
        state = TrainingState(model, torch.optim.SGD(model.parameters(), lr=0.1))
        manager = CheckpointManager(tmp_path / name, layout="sharded")
        manager.save(1, state)
        if name == "ours":
            manager.save(2, state)
    return tmp_path / "theirs", tmp_path / "ours"


def point_shards_at(metadata_path: Path, shard_name: str) -> None:
    metadata = pickle.loads(metadata_path.read_bytes())  # our own test file
    for index, info in list(metadata.storage_data.items()):
        metadata.storage_data[index] = dataclasses.replace(info, relative_path=shard_name)
    metadata_path.write_bytes(pickle.dumps(metadata))


OUTSIDE_NAMES = {
    "dot-dot": "../../theirs/step_00000001/__0_0.distcp",
    "absolute": "{theirs}/step_00000001/__0_0.distcp",
    "subfolder": "sub/__0_0.distcp",
    "dot-dot alone": "..",
}


@pytest.fixture(params=sorted(OUTSIDE_NAMES))
def outside_shard(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Path, str]:
    """(their run, our run whose step 2 reads `name` for its shards, name)."""
    theirs, ours = two_runs(tmp_path)
    name = OUTSIDE_NAMES[request.param].format(theirs=theirs)
    point_shards_at(ours / "step_00000002" / ".metadata", name)
    return theirs, ours, name


def test_stock_dcp_reads_the_other_runs_weights_through_such_metadata(tmp_path: Path) -> None:
    # The attack is real: DCP's own reader follows the name out of the folder.
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

    theirs, ours = two_runs(tmp_path)
    point_shards_at(ours / "step_00000002" / ".metadata", OUTSIDE_NAMES["dot-dot"])
    loaded: dict[str, object] = {}
    _load_state_dict(
        loaded,
        storage_reader=FileSystemReader(str(ours / "step_00000002")),
        planner=_EmptyStateDictLoadPlanner(keys={"model"}),
        no_dist=True,
    )
    their_weights = load_model_weights(theirs)
    assert all(torch.equal(loaded["model"][k], v) for k, v in their_weights.items())


def test_metadata_naming_a_shard_outside_its_folder_is_refused_with_a_clear_error(
    outside_shard: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, ours, name = outside_shard
    with pytest.raises(CheckpointError) as refused:
        load_model_weights(ours / "step_00000002")
    assert f"it names the shard file {name!r}, which is not a plain file name inside the " in str(
        refused.value
    )
    assert ckpt("ls", ours) == 2
    assert "not a plain file name" in capsys.readouterr().out


def test_resume_falls_back_past_metadata_naming_another_folders_shards(
    outside_shard: tuple[Path, Path, str],
) -> None:
    theirs, ours, _ = outside_shard
    model = TinyNet()
    state = TrainingState(model, torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.warns(
        CheckpointWarning, match=r"skipping bad checkpoint .*step_00000002.*plain file"
    ):
        resumed = CheckpointManager(ours).load_latest(state)
    assert resumed is not None and resumed["step"] == 1
    ours_step_1 = load_model_weights(ours / "step_00000001")
    assert all(torch.equal(model.state_dict()[k], v) for k, v in ours_step_1.items())
    their_weights = load_model_weights(theirs)
    assert not torch.equal(model.state_dict()["head.weight"], their_weights["head.weight"])


@pytest.mark.parametrize(("field", "value"), [("offset", -1), ("length", "12")])
def test_a_shard_byte_range_that_is_not_a_byte_count_is_refused(
    tmp_path: Path, field: str, value: object
) -> None:
    run = saved_folder(tmp_path)
    path = run / "step_00000001" / ".metadata"
    metadata = pickle.loads(path.read_bytes())
    index, info = next(iter(metadata.storage_data.items()))
    metadata.storage_data[index] = dataclasses.replace(info, **{field: value})
    path.write_bytes(pickle.dumps(metadata))
    with pytest.raises(CheckpointError, match=f"a shard's {field} is {value!r}, not a byte count"):
        load_model_weights(run / "step_00000001")
