"""TrainingState: everything comes back, the same way in both layouts; what
torch.load(weights_only=True) accepts, checked at save time; RNG states: every generator comes
back, through a weights_only load."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torchrig.checkpoint import (
    CheckpointError,
    CheckpointManager,
    CheckpointWarning,
    TrainingState,
)
from torchrig.checkpoint.state import (
    capture_rng_state,
    check_loadable,
    gather_rng_states,
    restore_rng_state,
)

from ...checkpoint_support import Position, TinyNet, train_steps

CONFIG = {"lr": 0.1, "layers": [6, 8, 3], "name": "tiny", "amp": False, "note": None}


def make_run(seed: int = 0) -> TrainingState:
    torch.manual_seed(seed)
    model = TinyNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return TrainingState(
        model,
        optimizer,
        scheduler=torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=100),
        scaler=torch.amp.GradScaler("cpu", init_scale=1024.0),
        sampler=Position(),
        config=dict(CONFIG),
    )


def test_round_trip_restores_everything(tmp_path: Path, layout: str) -> None:
    state = make_run()
    train_steps(state.model, state.optimizer)
    state.scheduler.step()
    state.optimizer.zero_grad()
    state.scaler.scale(state.model(torch.randn(4, 6)).pow(2).mean()).backward()
    state.scaler.step(state.optimizer)
    state.scaler.update()
    state.sampler.position = 48
    state.epoch = 1
    manager = CheckpointManager(tmp_path, layout=layout)
    manager.save(2, state)
    expected_next = torch.rand(3)  # what the RNG gives right after the save

    fresh = make_run(seed=1)
    fresh.epoch = 0
    fresh.config = {"lr": 0.5}  # the run's own settings: reported, never overwritten
    resumed = CheckpointManager(tmp_path, layout=layout).load_latest(fresh)
    assert resumed == {"epoch": 1, "step": 2, "sampler": {"position": 48}, "config": CONFIG}
    assert torch.equal(torch.rand(3), expected_next)
    assert fresh.epoch == 1 and fresh.sampler.position == 48 and fresh.config == {"lr": 0.5}
    for a, b in zip(
        state.model.state_dict().values(), fresh.model.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b)
    assert fresh.scheduler.state_dict() == state.scheduler.state_dict()
    assert fresh.scaler.state_dict() == state.scaler.state_dict()
    # optimizer moments came back too: one more identical step gives identical weights
    torch.manual_seed(5)
    train_steps(state.model, state.optimizer, 1)
    torch.manual_seed(5)
    train_steps(fresh.model, fresh.optimizer, 1)
    for a, b in zip(state.model.parameters(), fresh.model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_epoch_is_the_samplers_unless_set() -> None:
    class EpochSampler(Position):
        epoch = 4

    assert TrainingState(TinyNet(), sampler=EpochSampler()).progress(0)["epoch"] == 4
    assert TrainingState(TinyNet(), sampler=EpochSampler(), epoch=2).progress(0)["epoch"] == 2
    assert TrainingState(TinyNet()).progress(0)["epoch"] == 0


def test_a_part_that_cannot_be_checkpointed_is_refused_at_once() -> None:
    dataset = list(range(8))
    plain = torch.utils.data.DistributedSampler(dataset, num_replicas=1, rank=0)
    with pytest.raises(TypeError, match=r"sampler=.*DistributedSampler has no state_dict"):
        TrainingState(TinyNet(), sampler=plain)
    with pytest.raises(TypeError, match=r"scheduler=.*dict has no state_dict"):
        TrainingState(TinyNet(), scheduler={"lr": 0.1})  # type: ignore[arg-type]


def test_missing_part_warns_and_keeps_the_object(tmp_path: Path, layout: str) -> None:
    run = make_run()
    manager = CheckpointManager(tmp_path, layout=layout)
    manager.save(1, TrainingState(run.model, run.optimizer, sampler=run.sampler))
    before = run.scheduler.state_dict()
    with pytest.warns(CheckpointWarning, match="no scheduler state"):
        manager.load_latest(TrainingState(run.model, run.optimizer, scheduler=run.scheduler))
    assert run.scheduler.state_dict() == before


def test_resume_with_amp_turned_on_starts_a_fresh_scaler(tmp_path: Path, layout: str) -> None:
    run = make_run()
    disabled = torch.amp.GradScaler("cpu", enabled=False)
    manager = CheckpointManager(tmp_path, layout=layout)
    manager.save(1, TrainingState(run.model, run.optimizer, scaler=disabled))
    with pytest.warns(CheckpointWarning, match="no scaler state"):
        manager.load_latest(TrainingState(run.model, run.optimizer, scaler=run.scaler))
    assert run.scaler.get_scale() == 1024.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # AMP off then and now: nothing to say
        manager.load_latest(TrainingState(run.model, run.optimizer, scaler=disabled))


# --- more stateful objects, by name ---------------------------------------------------------


class Counter:
    """A user's own stateful object: anything with state_dict() / load_state_dict()."""

    def __init__(self, count: int = 0) -> None:
        self.count = count

    def state_dict(self) -> dict:
        return {"count": self.count}

    def load_state_dict(self, state: dict) -> None:
        self.count = state["count"]


def with_extras(seed: int, **extras) -> TrainingState:
    run = make_run(seed)
    return TrainingState(run.model, run.optimizer, scheduler=run.scheduler, extras=extras)


def test_an_ema_and_a_second_scheduler_come_back_without_touching_torchrig(
    tmp_path: Path, layout: str
) -> None:
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    state = with_extras(0)
    ema = AveragedModel(state.model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    warmup = torch.optim.lr_scheduler.LinearLR(state.optimizer, start_factor=0.1, total_iters=5)
    state.extras.update(ema=ema, warmup=warmup, counter=Counter())
    for _ in range(3):
        train_steps(state.model, state.optimizer, 1)
        ema.update_parameters(state.model)
        warmup.step()
    state.extras["counter"].count = 7
    CheckpointManager(tmp_path, layout=layout).save(3, state)

    fresh = with_extras(1)
    fresh_ema = AveragedModel(fresh.model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    fresh_warmup = torch.optim.lr_scheduler.LinearLR(fresh.optimizer, start_factor=0.1)
    fresh.extras.update(ema=fresh_ema, warmup=fresh_warmup, counter=Counter())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # everything saved has its object: nothing to say
        CheckpointManager(tmp_path, layout=layout).load_latest(fresh)
    for name, tensor in ema.state_dict().items():
        assert torch.equal(fresh_ema.state_dict()[name], tensor), name
    assert fresh_warmup.state_dict() == warmup.state_dict()
    assert fresh.extras["counter"].count == 7


def test_an_extra_the_checkpoint_lacks_warns_and_one_it_has_too_many_is_named(
    tmp_path: Path, layout: str
) -> None:
    manager = CheckpointManager(tmp_path, layout=layout)
    manager.save(1, with_extras(0, old=Counter(3)))
    counter = Counter(5)
    with pytest.warns(CheckpointWarning) as warned:
        manager.load_latest(with_extras(0, counter=counter))
    messages = [str(w.message) for w in warned]
    assert any("no extras['counter'] state; extras['counter'] left as it is" in m for m in messages)
    assert any("extras ['old'] that this TrainingState has no object for" in m for m in messages)
    assert counter.count == 5


def test_extras_are_checked_like_the_other_parts() -> None:
    with pytest.raises(TypeError, match=r"extras\['ema'\]=.*dict has no state_dict"):
        TrainingState(TinyNet(), extras={"ema": {"decay": 0.9}})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="a name is a non-empty str"):
        TrainingState(TinyNet(), extras={"": Counter()})


def test_an_extra_whose_state_would_not_load_is_refused_at_save(tmp_path: Path) -> None:
    class WithAPath(Counter):
        def state_dict(self) -> dict:
            return {"where": Path("/x")}

    with pytest.raises(CheckpointError, match=r"state\['extras'\]\['odd'\]\['where'\] is a path"):
        CheckpointManager(tmp_path).save(1, with_extras(0, odd=WithAPath()))


def test_every_accepted_value_really_loads_with_weights_only(tmp_path: Path) -> None:
    state = {
        "sampler": {"order": torch.arange(4), "size": torch.Size([2]), "dtype": torch.float16},
        "config": {"nested": {"list": [1, 2.5, "x", None, True]}, "tuple": (1, 2)},
        "device": torch.device("cpu"),
        "raw": b"\x00",
    }
    check_loadable(state)
    torch.save(state, tmp_path / "s.pt")
    loaded = torch.load(tmp_path / "s.pt", weights_only=True)
    assert loaded["sampler"]["dtype"] == torch.float16 and loaded["config"]["tuple"] == (1, 2)


@pytest.mark.parametrize(
    "value, where",
    [
        ({"gen": np.random.default_rng(0)}, r"state\['gen'\] is a numpy\.random"),
        ({"a": [1, {"p": Path("/x")}]}, r"state\['a'\]\[1\]\['p'\]"),
        ({Path("/k"): 1}, r"state \(a key\)"),
        ({"f": np.float64(1.0)}, r"state\['f'\] is a numpy\.float64"),  # a float subclass
    ],
)
def test_refused_values_are_named_by_their_key_path(value: dict, where: str) -> None:
    with pytest.raises(CheckpointError, match=f"{where}.*weights_only"):
        check_loadable(value)


class Allowed:
    pass


def test_allow_listed_types_pass() -> None:
    with pytest.raises(CheckpointError):
        check_loadable({"x": Allowed()})
    with torch.serialization.safe_globals([Allowed]):
        check_loadable({"x": Allowed()})


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
    with pytest.warns(CheckpointWarning, match="2 ranks but this run has 1"):
        assert not restore_rng_state(states)
    assert torch.equal(torch.get_rng_state(), before)
