"""Exact resume from a mid-epoch checkpoint: the epoch's remaining batches, in the same order.

Every epoch starts from random state derived from (seed, epoch), so an interrupted epoch's
shuffle can be drawn again; the checkpoint keeps the random state of the step it was saved at,
restored once the batches already trained are skipped.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any, cast

import lightning as L
import numpy as np
import torch
from lightning.pytorch.loops.fetchers import _PrefetchDataFetcher


def epoch_seed(seed: int, epoch: int) -> int:
    """The seed of an epoch's random state (shuffles, dropout), the same on every rank."""
    return (seed * 1_000_003 + epoch) % 2**32


def reseed(seed: int) -> None:
    """Seed Python's, numpy's and torch's generators (all CUDA devices included)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    """The global random state, in types a weights-only checkpoint load accepts."""
    kind, keys, pos, has_gauss, gauss = cast(tuple[Any, ...], np.random.get_state())
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else []
    return {
        "python": random.getstate(),
        "numpy": [kind, torch.from_numpy(keys.copy()), pos, has_gauss, gauss],
        "torch": torch.get_rng_state(),
        "cuda": cuda,
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore a state from rng_state()."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy(), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class _SkipDone(Iterator[Any]):
    """The training fetcher's iterator for the epoch a restart lands in: skips what already ran."""

    def __init__(
        self, fetcher: _PrefetchDataFetcher, seed: int, epoch: int, saved: dict[str, Any] | None
    ) -> None:
        self.fetcher, self.seed, self.epoch, self.saved = fetcher, seed, epoch, saved
        self._started = False

    def _start(self) -> None:
        # Lightning has counted the batches done in this epoch into `fetched` by now.
        done = self.fetcher.fetched
        loader = self.fetcher.combined_loader
        reseed(epoch_seed(self.seed, self.epoch))
        if self.epoch > 0:
            # As in an uninterrupted run, the epoch's iterator is made after its reseed and after
            # Lightning set the samplers' epoch (the one made at setup predates both).
            iter(loader)
        for _ in range(done):
            next(loader)
        if self.saved is not None:
            set_rng_state(self.saved)

    def __next__(self) -> Any:
        if not self._started:
            self._started = True
            self._start()
        return next(self.fetcher.combined_loader)


class ExactResume(L.Callback):
    """Seeds every epoch from (seed, epoch) and continues a mid-epoch checkpoint exactly."""

    def __init__(self, seed: int, mid_epoch: bool) -> None:
        self.seed, self.mid_epoch = seed, mid_epoch
        self._saved: dict[str, Any] | None = None

    @property
    def state_key(self) -> str:
        return "hpctrain.ExactResume"

    def state_dict(self) -> dict[str, Any]:
        return {"rng": rng_state()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._saved = state_dict.get("rng")

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        reseed(epoch_seed(self.seed, trainer.current_epoch))

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        fetcher = trainer.fit_loop._data_fetcher
        # Only a fetcher of known length iterates lazily; an unsized loader was prefetched and
        # Lightning's own (approximate) mid-epoch resume applies.
        if not self.mid_epoch or type(fetcher) is not _PrefetchDataFetcher:
            return
        if fetcher.length is None or fetcher.batches:
            return
        fetcher.iterator = _SkipDone(fetcher, self.seed, trainer.current_epoch, self._saved)
