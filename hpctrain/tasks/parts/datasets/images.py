"""MNIST and FashionMNIST from local IDX files: held on the device when they fit, else loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from hpctrain.errors import ConfigError
from hpctrain.tasks.parts.datasets.fetch import locate_idx_files
from hpctrain.tasks.parts.datasets.idx import read_idx
from hpctrain.tasks.parts.datasets.resident import DeviceBatches, ReportsBatching, fits_on_device

Batch = tuple[torch.Tensor, torch.Tensor]


class ImageTensors(Dataset[Batch]):
    """28x28 uint8 images and their labels in memory, normalized as they are fetched."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, mean: float, std: float) -> None:
        self.images, self.labels = images, labels
        self.mean, self.std = mean, std

    def __len__(self) -> int:
        return self.images.shape[0]

    def prepare(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (N, 28, 28) as normalized float input (N, 1, 28, 28)."""
        return ((images.float() / 255.0 - self.mean) / self.std).unsqueeze(-3)

    def __getitem__(self, index: int) -> Batch:
        return self.prepare(self.images[index]), self.labels[index]

    def __getitems__(self, indices: list[int]) -> Batch:
        # The DataLoader hands a whole batch of indices to __getitems__ when it exists: one
        # tensor gather per batch instead of a Python call and a collation per sample.
        index = torch.as_tensor(indices)
        return self.prepare(self.images[index]), self.labels[index]


def whole_batch(batch: Any) -> Any:
    """Collation for ImageTensors, whose __getitems__ already returns a stacked batch."""
    return batch


def load_split(files: dict[str, Path], split: str, dataset: str) -> Batch:
    """Read the images and labels of one split ('train' or 'val'), checking they fit together."""
    images = read_idx(files[f"{split}_images"])
    labels = read_idx(files[f"{split}_labels"])
    where = files[f"{split}_images"].parent
    if images.ndim != 3 or images.shape[1:] != (28, 28) or images.dtype != np.uint8:
        raise ConfigError(
            f"{files[f'{split}_images']} holds {images.dtype} images of shape {images.shape[1:]}; "
            f"the {dataset} CNN needs 28x28 uint8 images",
            f"fetch the dataset again into {where}",
        )
    if labels.ndim != 1 or len(labels) != len(images):
        raise ConfigError(
            f"{files[f'{split}_labels']} has {len(labels)} labels for {len(images)} images",
            f"fetch the dataset again into {where}",
        )
    if len(labels) and (labels.min() < 0 or labels.max() > 9):
        raise ConfigError(f"{files[f'{split}_labels']} has labels outside 0-9", "fetch it again")
    return torch.from_numpy(images.copy()), torch.from_numpy(labels.astype(np.int64))


class ImageDataModule(ReportsBatching, L.LightningDataModule):
    """Serves an MNIST-style dataset (28x28 uint8 images, labels 0-9) from a directory of IDX
    files, normalized by the mean and standard deviation of its training pixels."""

    def __init__(
        self,
        dataset: str,
        directory: Path,
        batch_size: int,
        num_workers: int,
        seed: int,
        normalization: tuple[float, float],
        on_device: bool | str = False,
        chunk: int = 1,
    ) -> None:
        super().__init__()
        self.dataset, self.directory = dataset, directory
        # The mean and standard deviation of the training pixels (in [0, 1]).
        self.normalization = normalization
        self.batch_size, self.num_workers, self.seed = batch_size, num_workers, seed
        self.on_device, self.chunk = on_device, chunk
        # Decided in setup, once the device is known: True when the data is held there.
        self.resident = False
        self._train: ImageTensors | None = None
        self._val: ImageTensors | None = None

    def setup(self, stage: str) -> None:
        if self._train is not None:
            return
        files = locate_idx_files(self.dataset, self.directory)
        mean, std = self.normalization
        self._train = ImageTensors(*load_split(files, "train", self.dataset), mean, std)
        self._val = ImageTensors(*load_split(files, "val", self.dataset), mean, std)
        device = self.trainer.strategy.root_device if self.trainer else torch.device("cpu")
        size = sum(d.images.numel() + d.labels.numel() * 8 for d in (self._train, self._val))
        self.resident = self.on_device is True or (
            self.on_device == "auto" and fits_on_device(size, device)
        )
        if self.resident:
            for data in (self._train, self._val):
                data.images, data.labels = data.images.to(device), data.labels.to(device)
        else:
            # A DataLoader serves one batch at a time.
            self.chunk = 1

    def loader(
        self, data: ImageTensors, shuffle: bool, rank: int, world: int, pin_memory: bool
    ) -> DataLoader[Batch]:
        """A DataLoader over one rank's shard; Lightning calls set_epoch on its sampler."""
        sampler: DistributedSampler[int] = DistributedSampler(
            data, num_replicas=world, rank=rank, shuffle=shuffle, seed=self.seed
        )
        return DataLoader(
            data,
            batch_size=self.batch_size,
            sampler=sampler,
            num_workers=self.num_workers,
            pin_memory=pin_memory,
            persistent_workers=self.num_workers > 0,
            collate_fn=whole_batch,
        )

    def batches(self, data: ImageTensors, shuffle: bool, rank: int, world: int) -> DeviceBatches:
        """The device-resident batches of one rank's shard: the loader's batches, in its order."""
        sampler: DistributedSampler[int] = DistributedSampler(
            data, num_replicas=world, rank=rank, shuffle=shuffle, seed=self.seed
        )
        return DeviceBatches(
            data.images, data.labels, self.batch_size, rank, world,
            chunk=self.chunk, sampler=sampler, transform=data.prepare,
        )

    def _loader(self, data: ImageTensors, shuffle: bool) -> DataLoader[Batch] | DeviceBatches:
        trainer = self.trainer
        rank, world = (trainer.global_rank, trainer.world_size) if trainer else (0, 1)
        if self.resident:
            return self.batches(data, shuffle, rank, world)
        on_gpu = bool(trainer and trainer.strategy.root_device.type == "cuda")
        return self.loader(data, shuffle, rank, world, pin_memory=on_gpu)

    def train_dataloader(self) -> DataLoader[Batch] | DeviceBatches:
        assert self._train is not None
        return self._loader(self._train, shuffle=True)

    def val_dataloader(self) -> DataLoader[Batch] | DeviceBatches:
        assert self._val is not None
        return self._loader(self._val, shuffle=False)
