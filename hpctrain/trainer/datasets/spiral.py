"""The spiral task's data: generated from the seed, kept on the device, sharded per rank."""

from __future__ import annotations

import lightning as L
import torch

from hpctrain.trainconfig.model import DataConfig
from hpctrain.trainer.datasets.points import make_spiral
from hpctrain.trainer.datasets.resident import DeviceBatches

Batch = tuple[torch.Tensor, torch.Tensor]


class SpiralDataModule(L.LightningDataModule):
    """Generates the spirals once per process and serves per-rank DeviceBatches on the device."""

    resident = True

    def __init__(self, data: DataConfig, batch_size: int, seed: int, chunk: int = 1) -> None:
        super().__init__()
        self.data, self.batch_size, self.seed, self.chunk = data, batch_size, seed, chunk
        self._train: Batch | None = None
        self._val: Batch | None = None

    # What the recorder reports (hpctrain.trainer.facts.DeclaresBatching).
    @property
    def batches_per_call(self) -> int:
        return self.chunk

    @property
    def data_on_device(self) -> bool:
        return self.resident

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
