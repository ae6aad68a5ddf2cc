"""The resumable sampler and the synthetic dataset: order, sharding, resume on any world size."""

from __future__ import annotations

import pytest
import torch
from torchrig.train.data import (
    ResumableDistributedSampler,
    SyntheticImages,
    WithIndex,
    epoch_permutation,
    rank_share,
)


def samplers(length: int, world_size: int, seed: int = 3) -> list[ResumableDistributedSampler]:
    dataset = range(length)
    return [
        ResumableDistributedSampler(dataset, world_size, r, seed=seed) for r in range(world_size)
    ]


def consume(sampler_list: list[ResumableDistributedSampler], batch: int, batches: int) -> list[int]:
    """What the ranks train on in `batches` lockstep batches, recorded like the training loop."""
    seen: list[int] = []
    iterators = [iter(s) for s in sampler_list]
    for _ in range(batches):
        for sampler, iterator in zip(sampler_list, iterators, strict=True):
            taken = [next(iterator) for _ in range(batch)]
            seen += taken
            sampler.advance(len(taken))
    return seen


def test_every_rank_gets_a_disjoint_equal_share_of_one_permutation() -> None:
    ranks = samplers(10, 3)
    shares = [list(s) for s in ranks]
    assert [len(share) for share in shares] == [3, 3, 3]  # 10 // 3, the one left over is dropped
    flat = [i for share in shares for i in share]
    assert len(set(flat)) == 9
    assert set(flat) <= set(range(10))
    assert all(len(s) == 3 for s in ranks)


def test_the_order_depends_on_seed_and_epoch_only() -> None:
    assert epoch_permutation(50, seed=1, epoch=0) == epoch_permutation(50, seed=1, epoch=0)
    assert epoch_permutation(50, seed=1, epoch=0) != epoch_permutation(50, seed=1, epoch=1)
    assert epoch_permutation(50, seed=1, epoch=0) != epoch_permutation(50, seed=2, epoch=0)


def test_set_epoch_changes_the_order_and_restarts_the_count() -> None:
    (sampler,) = samplers(20, 1)
    first = list(sampler)
    sampler.advance(5)
    sampler.set_epoch(1)
    assert sampler.state_dict() == {"epoch": 1, "consumed": 0}
    assert sorted(list(sampler)) == sorted(first)
    assert list(sampler) != first


def test_interleaved_shares_consume_a_prefix_of_the_remaining_order() -> None:
    remaining = list(range(100, 124))
    shares = [rank_share(remaining, r, 4) for r in range(4)]
    after_two_each = {i for share in shares for i in share[:2]}
    assert after_two_each == set(remaining[:8])


@pytest.mark.parametrize(("before", "after"), [(2, 2), (2, 3), (3, 2), (4, 1), (1, 4)])
def test_resume_on_any_world_size_sees_each_sample_exactly_once(before: int, after: int) -> None:
    length, batch = 120, 3
    first = samplers(length, before)
    seen = consume(first, batch, batches=4)
    state = first[0].state_dict()
    assert state == {"epoch": 0, "consumed": 4 * batch * before}
    assert all(s.state_dict() == state for s in first)  # every rank agrees on the position

    resumed = samplers(length, after)
    for sampler in resumed:
        sampler.load_state_dict(state)
    seen += [i for s in resumed for i in s]
    assert len(seen) == len(set(seen)), "a sample was trained on twice"
    left_out = set(range(length)) - set(seen)
    assert len(left_out) < after  # only the indivisible tail of the epoch
    order = epoch_permutation(length, seed=3, epoch=0)
    assert left_out == set(order[length - len(left_out) :])


def test_resume_at_the_end_of_an_epoch_yields_nothing_then_the_next_epoch() -> None:
    (sampler,) = samplers(8, 1)
    sampler.load_state_dict({"epoch": 2, "consumed": 8})
    assert list(sampler) == []
    sampler.set_epoch(3)
    assert len(list(sampler)) == 8


def test_state_round_trips_through_a_checkpoint_friendly_dict() -> None:
    (sampler,) = samplers(30, 1)
    sampler.set_epoch(4)
    sampler.advance(7)
    state = sampler.state_dict()
    assert state == {"epoch": 4, "consumed": 7}
    (other,) = samplers(30, 1)
    other.load_state_dict(state)
    assert other.state_dict() == state
    assert list(other) == epoch_permutation(30, 3, 4)[7:]


@pytest.mark.parametrize(
    "state",
    [{}, {"epoch": 0}, {"epoch": "x", "consumed": 0}, {"epoch": -1, "consumed": 0},
     {"epoch": 0, "consumed": 31}, None],
)  # fmt: skip
def test_bad_state_is_a_clear_error(state: object) -> None:
    (sampler,) = samplers(30, 1)
    with pytest.raises(ValueError, match="sampler state"):
        sampler.load_state_dict(state)  # type: ignore[arg-type]


def test_bad_construction_and_overrun_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="num_replicas"):
        ResumableDistributedSampler(range(4), 0, 0)
    with pytest.raises(ValueError, match="rank"):
        ResumableDistributedSampler(range(4), 2, 2)
    with pytest.raises(ValueError, match="fewer than the 3 processes"):
        ResumableDistributedSampler(range(2), 3, 0)
    (sampler,) = samplers(4, 1)
    with pytest.raises(RuntimeError, match="more samples than the sampler yielded"):
        sampler.advance(5)
    with pytest.raises(ValueError, match=">= 0"):
        sampler.advance(-1)


def test_synthetic_sample_depends_only_on_seed_and_index() -> None:
    data = SyntheticImages(length=10, image_size=4, num_classes=3, seed=5)
    image, label = data[7]
    assert image.shape == (3, 4, 4) and image.dtype == torch.float32
    assert label.dtype == torch.int64 and 0 <= int(label) < 3
    torch.manual_seed(123)  # the global RNG plays no part
    again, label_again = SyntheticImages(10, 4, 3, seed=5)[7]
    assert torch.equal(image, again) and torch.equal(label, label_again)
    assert not torch.equal(image, data[6][0])
    assert not torch.equal(image, SyntheticImages(10, 4, 3, seed=6)[7][0])


def test_synthetic_labels_are_learnable_and_bounds_checked() -> None:
    data = SyntheticImages(length=200, image_size=2, num_classes=2, seed=0)
    means = {0: [], 1: []}
    for i in range(len(data)):
        image, label = data[i]
        means[int(label)].append(image.mean().item())
    assert sum(means[1]) / len(means[1]) > sum(means[0]) / len(means[0]) + 1
    with pytest.raises(IndexError):
        data[200]
    with pytest.raises(ValueError, match="must be >= 1"):
        SyntheticImages(0, 2, 2)


def test_with_index_carries_the_index() -> None:
    data = WithIndex(SyntheticImages(5, 2, 2))
    assert len(data) == 5
    assert data[3][2] == 3
