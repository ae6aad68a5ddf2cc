"""Multi-process (gloo, CPU): one CheckpointManager for a DDP model (one file per step, written by
rank 0) and an FSDP2 model (one folder per step, every rank writing its shards)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torchrig.checkpoint import (
    CheckpointError,
    CheckpointManager,
    CheckpointWarning,
    TrainingState,
    load_model_weights,
)

from ...checkpoint_support import Position, TinyNet, ckpt, run_ranks, train_steps

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


class Unpicklable:
    """Passes the check at save time once allow-listed, then fails while rank 0 writes it."""

    def __reduce__(self) -> tuple:
        raise RuntimeError("disk on fire")


def _ddp_worker(rank: int, world: int, directory: str) -> None:
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(TinyNet())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train_steps(model, optimizer)
    torch.manual_seed(100 + rank)  # ranks' RNG streams differ, as with per-rank dropout seeds
    state = TrainingState(model, optimizer, sampler=Position(), config={"world": world})
    manager = CheckpointManager(directory, keep=2)
    for step in (1, 2, 3):
        state.sampler.position = step * 8
        path = manager.save(step, state)
        assert (path is not None) == (rank == 0)
        # the barrier inside save: every rank sees the finished file right away
        assert Path(directory, f"step_{step:08d}.pt").is_file()
    saved = torch.load(Path(directory, "step_00000003.pt"), weights_only=True)
    assert "module." not in "".join(saved["model"])
    expected = torch.rand(2)

    fresh = torch.nn.parallel.DistributedDataParallel(TinyNet())
    fresh_opt = torch.optim.SGD(fresh.parameters(), lr=0.1, momentum=0.9)
    fresh_state = TrainingState(fresh, fresh_opt, sampler=Position())
    resumed = manager.load_latest(fresh_state)
    assert resumed is not None
    assert resumed["step"] == 3 and resumed["sampler"] == {"position": 24}
    assert fresh_state.sampler.position == 24
    assert torch.equal(torch.rand(2), expected), "this rank's own RNG stream came back"
    for a, b in zip(model.parameters(), fresh.parameters(), strict=True):
        assert torch.equal(a, b)
    if rank == 0:
        assert sorted(p.name for p in Path(directory).glob("step_*")) == [
            "step_00000002.pt",
            "step_00000003.pt",
        ]

    # rank 0 fails to write: every rank raises, none is left waiting in a collective
    state.sampler.position = Unpicklable()
    with (
        torch.serialization.safe_globals([Unpicklable]),
        pytest.raises(RuntimeError if rank == 0 else CheckpointError, match="disk on fire"),
    ):
        manager.save(4, state)
    assert manager.load_latest(fresh_state)["step"] == 3  # the good checkpoints are untouched

    # a directory that is not shared: rank 0 sees step 1, rank 1 sees nothing
    split = CheckpointManager(f"{directory}-rank{rank}")
    state.sampler.position = 0
    split.save(1, state)
    with pytest.raises(CheckpointError, match="ranks found different checkpoints"):
        split.load_latest(fresh_state)

    # ... and one where only rank 0 sees step folders: the ranks would pick different layouts
    if rank == 0:
        Path(f"{directory}-layout0/step_00000001").mkdir(parents=True)
    dist.barrier()
    with pytest.raises(CheckpointError, match="ranks chose different checkpoint layouts"):
        CheckpointManager(f"{directory}-layout{rank}").load_latest(fresh_state)


def test_ddp_save_on_rank0_resume_everywhere(tmp_path: Path) -> None:
    run_ranks(_ddp_worker, 2, tmp_path, str(tmp_path / "ckpt"))


def _fsdp_model(seed: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(seed)
    model = TinyNet()
    fully_shard(model.body)
    fully_shard(model)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def _full(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.full_tensor().clone() for k, v in model.state_dict().items()}


def _fsdp_worker(rank: int, world: int, directory: str, reference: str) -> None:
    model, optimizer = _fsdp_model(seed=0)
    state = TrainingState(model, optimizer, config={"lr": 0.01}, epoch=0)
    manager = CheckpointManager(directory, keep=2)  # "auto": DTensor parameters, so sharded
    full_by_step = {}
    for step in (1, 2, 3):
        train_steps(model, optimizer, 1)
        assert (manager.save(step, state) is not None) == (rank == 0)
        full_by_step[step] = _full(model)
    if rank == 0:
        torch.save(full_by_step[2], reference)
        names = sorted(p.name for p in Path(directory).iterdir())
        assert names == ["latest", "step_00000002", "step_00000003"], names
    expected_rand = torch.rand(3)
    moments = {k: v["exp_avg"].full_tensor() for k, v in optimizer.state_dict()["state"].items()}

    # the single-file layout would save rank 0's shards only: refused, saying what to use
    with pytest.raises(CheckpointError, match="layout='sharded'"):
        CheckpointManager(f"{directory}-file", layout="file").save(3, state)
    assert not Path(f"{directory}-file").exists()

    fresh, fresh_opt = _fsdp_model(seed=1)
    train_steps(fresh, fresh_opt, 1)  # different weights and moments before the load
    resumed = manager.load_latest(TrainingState(fresh, fresh_opt))
    assert resumed == {"epoch": 0, "step": 3, "sampler": None, "config": {"lr": 0.01}}
    assert torch.equal(torch.rand(3), expected_rand)
    for key, value in _full(fresh).items():
        assert torch.equal(value, full_by_step[3][key]), key
    for key, value in fresh_opt.state_dict()["state"].items():
        assert torch.equal(value["exp_avg"].full_tensor(), moments[key])

    # A truncated shard in the newest folder: every rank falls back to step 2 together.
    if rank == 0:
        shard = next(Path(directory, "step_00000003").glob("*.distcp"))
        shard.write_bytes(shard.read_bytes()[:10])
    dist.barrier()
    # and this time into a model whose optimizer never stepped (no state yet), as at a restart
    untouched, untouched_opt = _fsdp_model(seed=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resumed = CheckpointManager(directory).load_latest(TrainingState(untouched, untouched_opt))
    assert resumed is not None and resumed["step"] == 2
    assert len(untouched_opt.state_dict()["state"]) == len(moments)
    for key, value in _full(untouched).items():
        assert torch.equal(value, full_by_step[2][key]), key
    assert any(
        w.category is CheckpointWarning and "step_00000003" in str(w.message) for w in caught
    )


def test_fsdp2_sharded_save_resume_and_fallback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "sharded"
    reference = tmp_path / "reference.pt"
    run_ranks(_fsdp_worker, 2, tmp_path, str(directory), str(reference))
    # Export path: full weights from the shards in one process, no process group. Step 3 was
    # damaged by the workers, so it falls back to step 2, with a warning naming step 3.
    with pytest.warns(CheckpointWarning, match="step_00000003"):
        weights = load_model_weights(directory)
    expected = torch.load(reference, weights_only=True)
    assert weights.keys() == expected.keys()
    for key, value in expected.items():
        assert torch.equal(weights[key], value), key

    # The CLI on the sharded folders: ls flags the damaged one, export writes the same weights
    # as load_model_weights.
    capsys.readouterr()
    assert ckpt("ls", directory) == 2
    listing = capsys.readouterr().out.splitlines()
    assert listing[1].split()[:2] == ["2", "step_00000002/"] and listing[1].endswith("ok")
    assert "*" in listing[2] and "truncated" in listing[2]
    extra = torch.load(directory / "step_00000002" / "extra.pt", weights_only=True)
    assert (extra["step"], extra["config"], len(extra["rng"])) == (2, {"lr": 0.01}, 2)
    out = tmp_path / "exported.pt"
    assert ckpt("export", directory, out) == 0
    exported = torch.load(out, weights_only=True)
    assert all(torch.equal(exported[k], v) for k, v in expected.items())
    # one step folder on its own exports too
    assert ckpt("export", directory / "step_00000002", out, "--force") == 0
    exported = torch.load(out, weights_only=True)
    assert all(torch.equal(exported[k], v) for k, v in expected.items())
