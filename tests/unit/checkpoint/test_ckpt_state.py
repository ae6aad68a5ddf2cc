"""training_state / restore_training_state, prefixes, RNG and weights_only safety."""

from __future__ import annotations

import enum
import random
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torchrig.checkpoint import (
    CheckpointError,
    CheckpointManager,
    capture_rng_state,
    gather_rng_states,
    load_model_weights,
    restore_rng_state,
    restore_training_state,
    strip_prefixes,
    training_state,
    unwrap_model,
)

from .ckpt_testlib import TinyNet, train_steps


def make_run(seed: int = 0) -> tuple:
    torch.manual_seed(seed)
    model = TinyNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=100)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    return model, optimizer, scheduler, scaler


def full_state(model, optimizer, scheduler, scaler, step: int = 2) -> dict:
    return training_state(
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        scaler=scaler,
        epoch=1,
        step=step,
        sampler={"epoch": 1, "position": 48, "seed": 0},
        config={"lr": 0.1, "layers": [6, 8, 3], "name": "tiny", "amp": False, "note": None},
    )


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


def test_round_trip_restores_everything(tmp_path: Path) -> None:
    model, optimizer, scheduler, scaler = make_run()
    train_steps(model, optimizer)
    scheduler.step()
    optimizer.zero_grad()
    scaler.scale(model(torch.randn(4, 6)).pow(2).mean()).backward()
    scaler.step(optimizer)
    scaler.update()
    manager = CheckpointManager(tmp_path)
    manager.save(2, full_state(model, optimizer, scheduler, scaler))
    expected_next = torch.rand(3)  # what the RNG gives right after the save

    model2, optimizer2, scheduler2, scaler2 = make_run(seed=1)
    state = manager.load_latest(map_location="cpu")
    assert state is not None
    resumed = restore_training_state(
        state, model=model2, optimizer=optimizer2, scheduler=scheduler2, scaler=scaler2
    )
    assert resumed == {
        "epoch": 1,
        "step": 2,
        "sampler": {"epoch": 1, "position": 48, "seed": 0},
        "config": {"lr": 0.1, "layers": [6, 8, 3], "name": "tiny", "amp": False, "note": None},
    }
    assert torch.equal(torch.rand(3), expected_next)
    for a, b in zip(model.state_dict().values(), model2.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert scheduler2.state_dict() == scheduler.state_dict()
    assert scaler2.state_dict() == scaler.state_dict()
    # optimizer moments came back too: one more identical step gives identical weights
    torch.manual_seed(5)
    train_steps(model, optimizer, 1)
    torch.manual_seed(5)
    train_steps(model2, optimizer2, 1)
    for a, b in zip(model.parameters(), model2.parameters(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit, on import
def test_wrapped_models_save_and_load_prefix_free(tmp_path: Path) -> None:
    model, optimizer, _, _ = make_run()
    wrapped = torch.nn.DataParallel(torch.compile(model))
    state = training_state(
        model=wrapped, optimizer=optimizer, epoch=0, step=0, sampler={}, config={}
    )
    assert set(state["model"]) == set(TinyNet().state_dict())
    target = torch.nn.DataParallel(TinyNet())
    restore_training_state(state, model=target)
    assert torch.equal(target.module.head.weight, model.head.weight)


def test_loads_a_foreign_prefixed_checkpoint(tmp_path: Path) -> None:
    source = TinyNet()
    foreign = {f"module._orig_mod.{k}": v for k, v in source.state_dict().items()}
    torch.save(foreign, tmp_path / "other.pt")
    weights = load_model_weights(tmp_path / "other.pt")
    assert set(weights) == set(source.state_dict())
    # and restore_training_state matches prefixed keys against a plain model
    model, optimizer, _, _ = make_run(seed=3)
    state = training_state(model=model, optimizer=optimizer, epoch=0, step=0, sampler={}, config={})
    state["model"] = foreign
    restore_training_state(state, model=model)
    assert torch.equal(model.head.weight, source.head.weight)


def test_mismatched_model_is_a_clear_error() -> None:
    model, optimizer, _, _ = make_run()
    state = training_state(model=model, optimizer=optimizer, epoch=0, step=0, sampler={}, config={})
    with pytest.raises(
        CheckpointError, match=r"missing 0\.bias, 0\.weight; unexpected body\.0\.bias"
    ):
        restore_training_state(state, model=torch.nn.Sequential(torch.nn.Linear(6, 3)))
    with pytest.raises(CheckpointError, match=r"size mismatch for head\.weight"):
        wider = TinyNet()
        wider.head = torch.nn.Linear(8, 5)
        restore_training_state(state, model=wider)
    with pytest.raises(CheckpointError, match="format"):
        restore_training_state({"model": {}}, model=model)


def test_missing_part_warns_and_keeps_object() -> None:
    model, optimizer, scheduler, _ = make_run()
    state = training_state(model=model, optimizer=optimizer, epoch=0, step=0, sampler={}, config={})
    with pytest.warns(UserWarning, match="no scheduler state"):
        restore_training_state(state, model=model, scheduler=scheduler)


def test_resume_with_amp_turned_on_starts_a_fresh_scaler() -> None:
    model, optimizer, _, scaler = make_run()
    disabled = torch.amp.GradScaler("cpu", enabled=False)
    state = training_state(
        model=model, optimizer=optimizer, scaler=disabled, epoch=0, step=0, sampler={}, config={}
    )
    assert state["scaler"] == {}
    with pytest.warns(UserWarning, match="no scaler state"):
        restore_training_state(state, model=model, scaler=scaler)
    assert scaler.get_scale() == 1024.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # AMP off then and now: nothing to say
        restore_training_state(state, model=model, scaler=disabled)


class Colour(enum.IntEnum):
    RED = 1


@pytest.mark.parametrize(
    "config",
    [
        {"path": Path("/x")},
        {1: "a"},
        {"a": {"b": object()}},
        {"t": torch.zeros(1)},
        {"lr": np.float64(0.1)},  # a float subclass: JSON takes it, weights_only does not
        {"colour": Colour.RED},
    ],
)
def test_config_must_be_json_like(config: dict) -> None:
    model, optimizer, _, _ = make_run()
    with pytest.raises(CheckpointError, match="config"):
        training_state(model=model, optimizer=optimizer, epoch=0, step=0, sampler={}, config=config)


def test_every_accepted_value_really_loads_with_weights_only(tmp_path: Path) -> None:
    model, optimizer, scheduler, scaler = make_run()
    state = training_state(
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        scaler=scaler,
        epoch=0,
        step=0,
        sampler={"order": torch.arange(4), "size": torch.Size([2]), "dtype": torch.float16},
        config={"nested": {"list": [1, 2.5, "x", None, True]}, "tuple": (1, 2)},
    )
    torch.save(state, tmp_path / "s.pt")
    assert torch.load(tmp_path / "s.pt", weights_only=True)["sampler"]["dtype"] == torch.float16


def test_unloadable_sampler_state_refused_at_save() -> None:
    model, optimizer, _, _ = make_run()
    with pytest.raises(CheckpointError, match=r"state\['sampler'\]\['gen'\].*weights_only"):
        training_state(
            model=model,
            optimizer=optimizer,
            epoch=0,
            step=0,
            sampler={"gen": np.random.default_rng(0)},
            config={},
        )


def test_rng_state_round_trip_through_weights_only_load(tmp_path: Path) -> None:
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    random.gauss(0, 1)  # leaves a cached gaussian in python's state
    states = gather_rng_states()
    assert len(states) == 1
    torch.save(states, tmp_path / "rng.pt")
    expected = (random.random(), np.random.rand(), torch.rand(1), random.gauss(0, 1))
    random.seed(9)
    np.random.seed(9)
    torch.manual_seed(9)
    assert restore_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True))
    assert (random.random(), np.random.rand(), torch.rand(1), random.gauss(0, 1)) == expected


def test_rng_world_size_mismatch_restores_nothing() -> None:
    states = [capture_rng_state(), capture_rng_state()]
    torch.manual_seed(4)
    before = torch.get_rng_state()
    with pytest.warns(UserWarning, match="2 ranks but this run has 1"):
        assert not restore_rng_state(states)
    assert torch.equal(torch.get_rng_state(), before)


def test_load_model_weights_errors(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no such file"):
        load_model_weights(tmp_path / "absent.pt")
    with pytest.raises(CheckpointError, match="no good checkpoint"):
        load_model_weights(tmp_path)
    torch.save({"a": 1}, tmp_path / "x.pt")
    with pytest.raises(CheckpointError, match="neither"):
        load_model_weights(tmp_path / "x.pt")
    (tmp_path / "y.pt").write_text("hello")
    with pytest.raises(CheckpointError, match=r"y\.pt"):
        load_model_weights(tmp_path / "y.pt")
