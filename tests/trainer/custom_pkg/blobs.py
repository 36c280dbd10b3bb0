"""Two Gaussian blobs and a one-hidden-layer classifier, written as a user would."""

from __future__ import annotations

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class BlobData(L.LightningDataModule):
    """Two well separated Gaussian blobs in 2-D."""

    def __init__(self, batch_size: int = 16, samples: int = 512) -> None:
        super().__init__()
        self.batch_size, self.samples = batch_size, samples

    def setup(self, stage: str) -> None:
        g = torch.Generator().manual_seed(0)
        y = torch.arange(self.samples) % 2
        x = torch.randn(self.samples, 2, generator=g) * 0.5 + (y[:, None] * 2 - 1) * 2.0
        self.train_set = TensorDataset(x[: self.samples // 2], y[: self.samples // 2])
        self.val_set = TensorDataset(x[self.samples // 2 :], y[self.samples // 2 :])

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=self.batch_size)


class BlobClassifier(L.LightningModule):
    """Linear, ReLU, linear; logs train_loss, val_loss and val_acc per epoch."""

    def __init__(self, lr: float = 0.1, width: int = 16) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(2, width), nn.ReLU(), nn.Linear(width, 2))

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self.net(x)
        self.log("val_loss", nn.functional.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.lr)
