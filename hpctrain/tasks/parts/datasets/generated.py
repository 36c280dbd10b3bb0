"""Data generated from the seed (spiral, synthcifar): kept on the device, sharded per rank."""

from __future__ import annotations

from collections.abc import Callable

import lightning as L
import torch

from hpctrain.tasks.parts.datasets.resident import DeviceBatches, ReportsBatching

Batch = tuple[torch.Tensor, torch.Tensor]


class GeneratedDataModule(ReportsBatching, L.LightningDataModule):
    """Generates the samples once per process (the same on every rank: `generate` seeds itself)
    and serves per-rank DeviceBatches on the device; the first `val_fraction` is validation."""

    resident = True

    def __init__(
        self,
        generate: Callable[[], Batch],
        val_fraction: float,
        batch_size: int,
        seed: int,
        chunk: int = 1,
    ) -> None:
        super().__init__()
        self.generate, self.val_fraction = generate, val_fraction
        self.batch_size, self.seed, self.chunk = batch_size, seed, chunk
        self._train: Batch | None = None
        self._val: Batch | None = None

    def setup(self, stage: str) -> None:
        if self._train is not None:
            return
        x, y = self.generate()
        device = self.trainer.strategy.root_device if self.trainer else torch.device("cpu")
        x, y = x.to(device), y.to(device)
        n_val = max(1, round(len(x) * self.val_fraction))
        self._train, self._val = (x[n_val:], y[n_val:]), (x[:n_val], y[:n_val])

    def _rank(self) -> tuple[int, int]:
        return (self.trainer.global_rank, self.trainer.world_size) if self.trainer else (0, 1)

    def train_dataloader(self) -> DeviceBatches:
        assert self._train is not None
        rank, world = self._rank()
        trainer = self.trainer
        return DeviceBatches(
            *self._train,
            batch_size=self.batch_size,
            rank=rank,
            world_size=world,
            shuffle=True,
            seed=self.seed,
            epoch_fn=(lambda: trainer.current_epoch) if trainer else None,
            chunk=self.chunk,
        )

    def val_dataloader(self) -> DeviceBatches:
        assert self._val is not None
        rank, world = self._rank()
        return DeviceBatches(
            *self._val, batch_size=self.batch_size, rank=rank, world_size=world, chunk=self.chunk
        )
