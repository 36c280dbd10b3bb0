"""BlobData served from the device with hpctrain's device_batches, or by the equivalent loader."""

from __future__ import annotations

from typing import Any

from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from hpctrain.tasks.parts.datasets.resident import device_batches

from .blobs import BlobData


class ResidentBlobData(BlobData):
    """The blobs as device-resident batches (resident=True) or through a DataLoader."""

    def __init__(self, batch_size: int = 16, samples: int = 512, resident: bool = True) -> None:
        super().__init__(batch_size, samples)
        self.resident = resident

    def _batches(self, data: TensorDataset, shuffle: bool) -> Any:
        if self.resident:
            x, y = data.tensors
            return device_batches(x, y, self.batch_size, self.trainer, shuffle=shuffle, seed=3)
        sampler: DistributedSampler[Any] = DistributedSampler(
            data, num_replicas=1, rank=0, shuffle=shuffle, seed=3
        )
        return DataLoader(data, batch_size=self.batch_size, sampler=sampler)

    def train_dataloader(self) -> Any:
        return self._batches(self.train_set, shuffle=True)

    def val_dataloader(self) -> Any:
        return self._batches(self.val_set, shuffle=False)
