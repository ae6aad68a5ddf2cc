"""Data helpers for resumable distributed training (docs/training.md); torch imported when used."""

from __future__ import annotations

from collections.abc import Iterator, Sized
from typing import Any


def epoch_permutation(num_samples: int, seed: int, epoch: int) -> list[int]:
    """The order of one epoch: the same on every rank, for any world size."""
    import torch

    generator = torch.Generator()
    generator.manual_seed(seed + epoch)
    return torch.randperm(num_samples, generator=generator).tolist()


def rank_share(remaining: list[int], rank: int, world_size: int) -> list[int]:
    """Rank `rank`'s part, interleaved (r, r+W...): what the ranks consumed stays a prefix of
    `remaining`, so any world size resumes from one count; all ranks get as many (DDP waits)."""
    per_rank = len(remaining) // world_size
    return remaining[rank : per_rank * world_size : world_size]


class ResumableDistributedSampler:
    """`DistributedSampler` that resumes mid-epoch on any world size: call `advance(len(batch))`
    after each batch the loop consumed (not what the DataLoader prefetched)."""

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int,
        rank: int,
        seed: int = 0,
    ) -> None:
        if num_replicas < 1:
            raise ValueError(f"num_replicas must be >= 1, got {num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank must be in [0, {num_replicas}), got {rank}")
        if len(dataset) < num_replicas:
            raise ValueError(
                f"the dataset has {len(dataset)} samples, fewer than the {num_replicas} processes"
            )
        self.num_samples_total = len(dataset)
        self.num_replicas = num_replicas
        self.rank = rank
        self.seed = seed
        self.epoch = 0
        # Samples of `epoch` consumed before this process's iterator started (from a checkpoint).
        self.start = 0
        # Samples of `epoch` consumed by all ranks together, as the loop reports them.
        self.consumed = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch to iterate; a new epoch starts from its beginning."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.start = 0
            self.consumed = 0

    def __iter__(self) -> Iterator[int]:
        order = epoch_permutation(self.num_samples_total, self.seed, self.epoch)
        return iter(rank_share(order[self.start :], self.rank, self.num_replicas))

    def __len__(self) -> int:
        return (self.num_samples_total - self.start) // self.num_replicas

    def advance(self, local_samples: int) -> None:
        """Record that each rank consumed `local_samples` more samples (ranks move in lockstep)."""
        if local_samples < 0:
            raise ValueError(f"local_samples must be >= 0, got {local_samples}")
        self.consumed += local_samples * self.num_replicas
        if self.consumed > self.num_samples_total:
            raise RuntimeError(
                f"consumed {self.consumed} samples of an epoch of {self.num_samples_total}: "
                "advance() was called for more samples than the sampler yielded"
            )

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "consumed": self.consumed}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        try:
            epoch = int(state["epoch"])
            consumed = int(state["consumed"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f"not a sampler state (expected {{'epoch': int, 'consumed': int}}): {state!r}"
            ) from None
        if epoch < 0 or not 0 <= consumed <= self.num_samples_total:
            raise ValueError(
                f"sampler state {state!r} does not fit a dataset of {self.num_samples_total}"
            )
        self.epoch = epoch
        self.start = consumed
        self.consumed = consumed


class SyntheticImages:
    """(image, label) pairs, sample i a function of (seed, i) only; a per-class brightness offset
    makes the loss fall, so a broken loop shows."""

    def __init__(self, length: int, image_size: int, num_classes: int, seed: int = 0) -> None:
        if length < 1 or image_size < 1 or num_classes < 1:
            raise ValueError(
                f"length, image_size and num_classes must be >= 1 "
                f"(got {length}, {image_size}, {num_classes})"
            )
        self.length = length
        self.image_size = image_size
        self.num_classes = num_classes
        self.seed = seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        import torch

        if not 0 <= index < self.length:
            raise IndexError(f"index {index} out of range for {self.length} samples")
        generator = torch.Generator()
        # A distinct, reproducible stream per sample: independent of order, rank and workers.
        generator.manual_seed(self.seed * 1_000_003 + index)
        label = int(torch.randint(self.num_classes, (1,), generator=generator))
        image = torch.randn(3, self.image_size, self.image_size, generator=generator)
        image += (label / max(1, self.num_classes - 1) - 0.5) * 2.0
        return image, torch.tensor(label, dtype=torch.int64)


class WithIndex:
    """Wraps a dataset so each item also carries its index (to log exactly what was trained on)."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> tuple[Any, Any, int]:
        image, label = self.dataset[index]
        return image, label, index
