"""An epoch's timing and the samples it trained, for samples/s."""

from __future__ import annotations

import time
from typing import Any

import lightning as L
import torch

from hpctrain.trainer.facts import batch_size_of
from hpctrain.trainer.records import PartialEpoch


def _sync(trainer: L.Trainer) -> None:
    if trainer.strategy.root_device.type == "cuda":
        torch.cuda.synchronize(trainer.strategy.root_device)


class Throughput:
    """Times the train phase of each epoch (rank 0's clock) and counts this rank's samples."""

    # The train phase ends at the end of the epoch's last training batch (CUDA synchronized),
    # so validation and checkpointing do not dilute samples/s.

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.started = time.perf_counter()
        self.train_end: float | None = None
        self.samples = 0
        self.uncounted = 0
        self.batch_samples: int | None = None

    def start_epoch(self, trainer: L.Trainer) -> None:
        _sync(trainer)
        self._reset()

    def count(self, batch: Any) -> None:
        """Count a batch before its step, so that a save from any batch-end hook includes it."""
        self.batch_samples = batch_size_of(batch)
        if self.batch_samples is None:
            self.uncounted += 1
        else:
            self.samples += self.batch_samples

    def end_train_phase(self, trainer: L.Trainer) -> float:
        """The train phase ends now: after the epoch's last batch, before Lightning validates."""
        _sync(trainer)
        self.train_end = time.perf_counter()
        return self.train_end

    def train_time(self, trainer: L.Trainer) -> float:
        """Seconds of the train phase; it ends now if nothing ended it yet."""
        end = self.train_end if self.train_end is not None else self.end_train_phase(trainer)
        return end - self.started

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def save_partial(self, partial: PartialEpoch) -> None:
        """Put this epoch's progress so far into a mid-epoch checkpoint's record."""
        partial.samples, partial.uncounted = self.samples, self.uncounted
        partial.train_time_s = self.elapsed()

    def restore(self, partial: PartialEpoch) -> None:
        """Continue the epoch a mid-epoch checkpoint was saved in."""
        self.samples, self.uncounted = partial.samples, partial.uncounted
        self.started -= partial.train_time_s
