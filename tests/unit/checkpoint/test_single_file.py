"""The single-file layout: what a step file holds, and the ways a file can be bad; model weights
without wrapper prefixes, and loading them into any wrapping."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest
import torch
from torchrig.checkpoint import (
    CheckpointError,
    CheckpointManager,
    CheckpointWarning,
    TrainingState,
)
from torchrig.checkpoint.single_file import (
    FORMAT,
    SingleFileLayout,
    load_model_state,
    sharded_parameter,
    strip_prefixes,
    unwrap_model,
)

from ...checkpoint_support import Position, TinyNet, same_weights, snapshot


def make_state(seed: int = 0) -> TrainingState:
    torch.manual_seed(seed)
    model = TinyNet()
    return TrainingState(model, torch.optim.SGD(model.parameters(), lr=0.1), sampler=Position())


def saved(directory: Path, steps: list[int], checksums: bool = False) -> CheckpointManager:
    manager = CheckpointManager(directory, layout="file", checksums=checksums)
    for step in steps:
        manager.save(step, make_state(seed=step))
    return manager


def resumed_step(manager: CheckpointManager) -> int | None:
    resumed = manager.load_latest(make_state(seed=99))
    return None if resumed is None else resumed["step"]


def corrupt(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(os.urandom(len(data)))
    elif how == "flipped":
        # bytes inside tensor data: torch.load alone would not notice, the CRC check does
        middle = len(data) // 2
        path.write_bytes(
            data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 8]) + data[middle + 8 :]
        )
    else:
        raise ValueError(how)


def test_the_file_holds_the_tagged_training_state(tmp_path: Path) -> None:
    state = make_state()
    state.sampler.position = 48
    state.config = {"lr": 0.1}
    path = CheckpointManager(tmp_path, layout="file").save(3, state)
    assert path is not None
    saved_state = torch.load(path, weights_only=True)
    assert list(saved_state) == [
        "format",
        "model",
        "optimizer",
        "scheduler",
        "scaler",
        "epoch",
        "step",
        "sampler",
        "rng",
        "config",
    ]
    assert saved_state["format"] == FORMAT == "torchrig-checkpoint/1"
    assert saved_state["step"] == 3 and saved_state["sampler"] == {"position": 48}
    assert saved_state["scheduler"] is None and saved_state["config"] == {"lr": 0.1}


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage", "flipped"])
def test_corrupt_latest_falls_back_with_a_warning(tmp_path: Path, how: str) -> None:
    manager = saved(tmp_path, [10, 20, 30], checksums=how == "flipped")
    corrupt(tmp_path / "step_00000030.pt", how)
    with pytest.warns(CheckpointWarning, match="step_00000030.pt"):
        assert resumed_step(manager) == 20
    infos = {info.step: info for info in manager.list(verify=True)}
    assert not infos[30].ok and infos[30].error
    assert infos[20].ok and infos[10].ok


def test_cheap_list_spots_truncation_without_loading(tmp_path: Path) -> None:
    manager = saved(tmp_path, [1, 2])
    corrupt(tmp_path / "step_00000002.pt", "truncated")
    infos = manager.list()
    assert [(i.step, i.ok) for i in infos] == [(1, True), (2, False)]
    assert infos[1].is_latest and "truncated" in (infos[1].error or "")


@pytest.mark.parametrize(
    "content, reason",
    [
        ([1, 2, 3], "holds a list, not a dict"),
        ({"step": 2}, r"not a torchrig checkpoint \(format None"),
    ],
)
def test_a_file_that_is_not_a_training_checkpoint_is_skipped(
    tmp_path: Path, content: object, reason: str
) -> None:
    manager = saved(tmp_path, [1])
    torch.save(content, tmp_path / "step_00000002.pt")
    (tmp_path / "latest").write_text("step_00000002.pt\n")
    with pytest.warns(CheckpointWarning, match=f"step_00000002.pt: {reason}"):
        assert resumed_step(manager) == 1


class Custom:
    """Not allow-listed: weights_only loading must refuse it."""


def test_unsafe_type_in_a_file_is_reported_not_executed(tmp_path: Path) -> None:
    torch.save({"format": FORMAT, "x": Custom()}, tmp_path / "step_00000001.pt")
    with pytest.warns(CheckpointWarning, match="step_00000001.pt"):
        assert resumed_step(CheckpointManager(tmp_path)) is None


def test_checksums_are_opt_in_and_the_switch_is_restored(tmp_path: Path) -> None:
    default = saved(tmp_path / "default", [1]).list()[0].path
    checked = saved(tmp_path / "checked", [1], checksums=True).list()[0].path
    with zipfile.ZipFile(default) as archive:
        assert all(info.CRC == 0 for info in archive.infolist())
    with zipfile.ZipFile(checked) as archive:
        assert all(info.CRC != 0 for info in archive.infolist() if info.file_size)
    assert torch.serialization.get_crc32_options() is True  # the process-wide switch is back
    for directory in (tmp_path / "default", tmp_path / "checked"):
        assert resumed_step(CheckpointManager(directory)) == 1


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit, on import
def test_wrapped_models_save_and_load_prefix_free(tmp_path: Path) -> None:
    state = make_state()
    wrapped = torch.nn.DataParallel(torch.compile(state.model))
    payload = SingleFileLayout().payload(TrainingState(wrapped, state.optimizer), step=0)
    assert set(payload["model"]) == set(TinyNet().state_dict())
    manager = CheckpointManager(tmp_path, layout="file")
    manager.save(0, TrainingState(wrapped, state.optimizer))
    target = torch.nn.DataParallel(TinyNet())
    assert manager.load_latest(TrainingState(target)) is not None
    assert same_weights(target.module, snapshot(state.model))


def test_loads_onto_the_device_it_is_asked_for(tmp_path: Path) -> None:
    path = CheckpointManager(tmp_path, layout="file").save(1, make_state())
    assert path is not None
    payload = SingleFileLayout().read(path, "meta")
    assert payload["model"]["head.weight"].device.type == "meta"


def test_strip_prefixes_any_order_and_nesting() -> None:
    sd = {
        "module._orig_mod.a.weight": 1,
        "_orig_mod.module.b": 2,
        "module.module.c": 3,
        "d.module.e": 4,  # only leading prefixes go
    }
    assert strip_prefixes(sd) == {"a.weight": 1, "b": 2, "c": 3, "d.module.e": 4}
    with pytest.raises(CheckpointError, match="both become"):
        strip_prefixes({"module.x": 1, "x": 2})


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit, on import
def test_unwrap_model_dataparallel_and_compiled() -> None:
    inner = TinyNet()
    assert unwrap_model(inner) is inner
    assert unwrap_model(torch.nn.DataParallel(inner)) is inner
    compiled = torch.compile(inner)  # wrapping only: nothing is compiled until it runs
    assert unwrap_model(torch.nn.DataParallel(compiled)) is inner


def test_prefixed_weights_load_into_a_plain_model_and_the_reverse() -> None:
    source = TinyNet()
    target = TinyNet()
    load_model_state(target, {f"module._orig_mod.{k}": v for k, v in source.state_dict().items()})
    assert same_weights(target, snapshot(source))
    wrapped = torch.nn.DataParallel(TinyNet())
    load_model_state(wrapped, source.state_dict())
    assert same_weights(wrapped.module, snapshot(source))


def test_mismatched_model_is_a_clear_error() -> None:
    weights = TinyNet().state_dict()
    with pytest.raises(
        CheckpointError, match=r"missing 0\.bias, 0\.weight; unexpected body\.0\.bias"
    ):
        load_model_state(torch.nn.Sequential(torch.nn.Linear(6, 3)), weights)
    wider = TinyNet()
    wider.head = torch.nn.Linear(8, 5)
    with pytest.raises(CheckpointError, match=r"size mismatch for head\.weight"):
        load_model_state(wider, weights)


def test_a_plain_model_has_no_sharded_parameter() -> None:
    assert sharded_parameter(TinyNet()) is None
