"""Datasets held on the training device: batches are index gathers, no DataLoader, no workers.

A DataLoader costs a Python round trip per batch (and worker IPC), which on a GPU leaves a small
model waiting for its input. When the whole dataset fits, it is copied to the device once (images
as uint8, a quarter of their float size) and every batch is a slice of one gather per epoch,
converted (normalized) per chunk as it is served.

Several consecutive batches can be served as one "chunk" (`chunk` > 1): the module splits it into
batches of `batch_size` and takes one optimizer step per batch, so that Lightning's fixed work per
training_step call is paid once per chunk rather than once per batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

Batch = tuple[torch.Tensor, torch.Tensor]



class ReportsBatching:
    """What a built-in data module reports to the recorder (hpctrain.trainer.facts's
    DeclaresBatching): batches per training_step call, and whether the data is on the device."""

    chunk: int
    resident: bool

    @property
    def batches_per_call(self) -> int:
        return self.chunk

    @property
    def data_on_device(self) -> bool:
        return self.resident

class DeviceBatches:
    """Batches of in-memory tensors for one rank, without DataLoader workers or collation."""

    # With `sampler` (a DistributedSampler, as the DataLoader path uses) the batches are exactly
    # the loader's: the same indices in the same order, the last batch short. Without one,
    # training shards are reshuffled every epoch from seed + epoch, identically on every rank,
    # and are equally long on every rank so that DDP's collectives line up.

    # Lightning inspects a loader with a `sampler` as it would a DataLoader.
    batch_sampler = None

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
        chunk: int = 1,
        sampler: Iterable[int] | None = None,
        transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> None:
        self.x, self.y = x, y
        self.batch_size, self.chunk = batch_size, chunk
        self.rank, self.world_size = rank, world_size
        self.shuffle, self.seed = shuffle, seed
        self.epoch_fn = epoch_fn
        # Lightning calls set_epoch on a loader's `sampler`, as it does for a DataLoader's.
        self.sampler = sampler
        self.transform = transform
        self._epochs_iterated = 0
        n = x.shape[0]
        self._start, self._stop = 0, 0
        if sampler is not None:
            longest = self.shard_size = len(sampler)  # type: ignore[arg-type]
        elif shuffle:
            # Equal shards: the few samples past a multiple of world_size sit out this epoch
            # (a different few each epoch), as with DistributedSampler(drop_last=True).
            longest = self.shard_size = n // world_size
        else:
            self._start, self._stop = rank * n // world_size, (rank + 1) * n // world_size
            self.shard_size = self._stop - self._start
            longest = -(-n // world_size)
        # Every rank yields the same number of batches (a validation shard one sample short
        # may end with an empty batch).
        self.batches = -(-longest // batch_size)

    def __len__(self) -> int:
        return -(-self.batches // self.chunk)

    def _epoch(self) -> int:
        return self.epoch_fn() if self.epoch_fn is not None else self._epochs_iterated

    def _shard(self) -> Batch:
        if self.sampler is not None:
            index = torch.as_tensor(list(self.sampler), dtype=torch.long).to(self.x.device)
            return self.x[index], self.y[index]
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + self._epoch())
            order = torch.randperm(self.x.shape[0], generator=g)
            index = order[self.rank :: self.world_size][: self.shard_size].to(self.x.device)
            return self.x[index], self.y[index]
        return self.x[self._start : self._stop], self.y[self._start : self._stop]

    def __iter__(self) -> Iterator[Batch]:
        xs, ys = self._shard()
        self._epochs_iterated += 1
        step = self.batch_size * self.chunk
        for i in range(len(self)):
            x = xs[i * step : (i + 1) * step]
            yield (self.transform(x) if self.transform else x), ys[i * step : (i + 1) * step]


def fits_on_device(nbytes: int, device: torch.device, share: float = 0.5) -> bool:
    """Whether `nbytes` of data fit in `share` of the device's free memory (always on a CPU)."""
    if device.type != "cuda":
        return True
    free, _ = torch.cuda.mem_get_info(device)
    return nbytes <= share * free


def device_batches(
    x: torch.Tensor,
    y: torch.Tensor,
    batch_size: int,
    trainer: object | None,
    shuffle: bool = False,
    seed: int = 0,
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> DeviceBatches:
    """A custom data module's in-memory tensors as this rank's batches, on the device if they fit.

    Return it from train_dataloader/val_dataloader instead of a DataLoader: the batches are those
    of DataLoader(batch_size, sampler=DistributedSampler(shuffle, seed)), epoch by epoch.
    """
    from torch.utils.data import DistributedSampler

    t: Any = trainer
    rank, world = (t.global_rank, t.world_size) if t else (0, 1)
    device = t.strategy.root_device if t else torch.device("cpu")
    if fits_on_device(x.nbytes + y.nbytes, device):
        x, y = x.to(device), y.to(device)
    sampler: DistributedSampler[int] = DistributedSampler(
        range(y.shape[0]),  # type: ignore[arg-type]
        num_replicas=world, rank=rank, shuffle=shuffle, seed=seed,
    )
    return DeviceBatches(x, y, batch_size, rank, world, sampler=sampler, transform=transform)
