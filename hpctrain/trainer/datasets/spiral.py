"""The spiral task's data: generated from the seed, kept on the device, sharded per rank."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import lightning as L
import torch

from hpctrain.trainer.config import DataConfig

Batch = tuple[torch.Tensor, torch.Tensor]


def make_spiral(
    samples: int, noise: float, turns: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two interleaved spiral arms in 2-D (class 0 and 1), shuffled; the same for every seed."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(samples) % 2
    # sqrt spreads the points evenly over the disc instead of crowding the centre.
    t = torch.rand(samples, generator=g).sqrt()
    angle = t * turns * 2 * math.pi + labels * math.pi
    points = torch.stack([t * torch.cos(angle), t * torch.sin(angle)], dim=1)
    points += noise * torch.randn(samples, 2, generator=g)
    order = torch.randperm(samples, generator=g)
    return points[order].float(), labels[order]


class TensorBatches:
    """Batches of in-memory tensors for one rank, without DataLoader workers or collation."""

    # Training shards are reshuffled every epoch from seed + epoch, identically on every rank,
    # and are equally long on every rank so that DDP's collectives line up.

    def __init__(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        batch_size: int,
        rank: int = 0,
        world_size: int = 1,
        shuffle: bool = False,
        seed: int = 0,
        epoch_fn: Callable[[], int] | None = None,
    ) -> None:
        self.x, self.y = x, y
        self.batch_size = batch_size
        self.rank, self.world_size = rank, world_size
        self.shuffle, self.seed = shuffle, seed
        self.epoch_fn = epoch_fn
        self._epochs_iterated = 0
        n = x.shape[0]
        if shuffle:
            # Equal shards: the few samples past a multiple of world_size sit out this epoch
            # (a different few each epoch), as with DistributedSampler(drop_last=True).
            self.shard_size = n // world_size
            self._start = self._stop = 0
            longest = self.shard_size
        else:
            self._start, self._stop = rank * n // world_size, (rank + 1) * n // world_size
            self.shard_size = self._stop - self._start
            longest = -(-n // world_size)
        # Every rank yields the same number of batches (a validation shard one sample short
        # may end with an empty batch).
        self._batches = -(-longest // batch_size)

    def __len__(self) -> int:
        return self._batches

    def _epoch(self) -> int:
        return self.epoch_fn() if self.epoch_fn is not None else self._epochs_iterated

    def __iter__(self) -> Iterator[Batch]:
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + self._epoch())
            order = torch.randperm(self.x.shape[0], generator=g)
            index = order[self.rank :: self.world_size][: self.shard_size].to(self.x.device)
            xs, ys = self.x[index], self.y[index]
        else:
            xs, ys = self.x[self._start : self._stop], self.y[self._start : self._stop]
        self._epochs_iterated += 1
        b = self.batch_size
        for i in range(self._batches):
            yield xs[i * b : (i + 1) * b], ys[i * b : (i + 1) * b]


class SpiralDataModule(L.LightningDataModule):
    """Generates the spirals once per process and serves per-rank TensorBatches on the device."""

    def __init__(self, data: DataConfig, batch_size: int, seed: int) -> None:
        super().__init__()
        self.data, self.batch_size, self.seed = data, batch_size, seed
        self._train: Batch | None = None
        self._val: Batch | None = None

    def setup(self, stage: str) -> None:
        if self._train is not None:
            return
        x, y = make_spiral(self.data.samples, self.data.noise, self.data.turns, self.seed)
        device = self.trainer.strategy.root_device if self.trainer else torch.device("cpu")
        x, y = x.to(device), y.to(device)
        n_val = max(1, round(len(x) * self.data.val_fraction))
        self._train, self._val = (x[n_val:], y[n_val:]), (x[:n_val], y[:n_val])

    def _rank(self) -> tuple[int, int]:
        return (self.trainer.global_rank, self.trainer.world_size) if self.trainer else (0, 1)

    def train_dataloader(self) -> TensorBatches:
        assert self._train is not None
        rank, world = self._rank()
        trainer = self.trainer
        return TensorBatches(
            *self._train,
            batch_size=self.batch_size,
            rank=rank,
            world_size=world,
            shuffle=True,
            seed=self.seed,
            epoch_fn=(lambda: trainer.current_epoch) if trainer else None,
        )

    def val_dataloader(self) -> TensorBatches:
        assert self._val is not None
        rank, world = self._rank()
        return TensorBatches(*self._val, batch_size=self.batch_size, rank=rank, world_size=world)
