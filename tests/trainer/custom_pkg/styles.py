"""Modules written in the other styles users write them in, all on the blobs of blobs.py."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader

from .blobs import BlobData

Batch = tuple[torch.Tensor, torch.Tensor]


def _net(width: int = 8) -> nn.Module:
    return nn.Sequential(nn.Linear(2, width), nn.ReLU(), nn.Linear(width, 2))


class TwoOptimizers(L.LightningModule):
    """Two networks, each with its own optimizer and learning rate (manual optimization)."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.first, self.second = _net(), _net()

    def training_step(self, batch: Batch, batch_idx: int) -> None:
        x, y = batch
        losses = {}
        for name, net, opt in zip(("loss_a", "loss_b"), (self.first, self.second),
                                  self.optimizers(), strict=True):
            loss = nn.functional.cross_entropy(net(x), y)
            opt.zero_grad()
            self.manual_backward(loss)
            opt.step()
            losses[name] = loss.detach()
        self.log_dict(losses, on_step=False, on_epoch=True, sync_dist=True)

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        x, y = batch
        acc = ((self.first(x) + self.second(x)).argmax(1) == y).float().mean()
        self.log("val_acc", acc, sync_dist=True)

    def configure_optimizers(self) -> list[torch.optim.Optimizer]:
        return [
            torch.optim.SGD(self.first.parameters(), lr=0.05),
            torch.optim.Adam(self.second.parameters(), lr=0.01),
        ]


class DictStep(L.LightningModule):
    """Returns a dict from training_step and logs only a validation accuracy."""

    def __init__(self) -> None:
        super().__init__()
        self.net = _net()

    def training_step(self, batch: Batch, batch_idx: int) -> dict[str, Any]:
        x, y = batch
        logits = self.net(x)
        acc = (logits.argmax(1) == y).float().mean()
        return {"loss": nn.functional.cross_entropy(logits, y), "acc": acc}

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        x, y = batch
        self.log("val_acc", (self.net(x).argmax(1) == y).float().mean())

    def configure_optimizers(self) -> Any:
        opt = torch.optim.SGD(self.net.parameters(), lr=0.2)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, 1, 0.5)}


class PerStepOnly(L.LightningModule):
    """Logs per step only, in training (Lightning's default there) and in validation."""

    def __init__(self, lr: float = 0.1) -> None:
        super().__init__()
        self.lr = lr
        self.net = _net()

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("batch_loss", loss)
        return loss

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        x, y = batch
        mse = ((self.net(x).softmax(1)[:, 1] - y.float()) ** 2).mean()
        self.log("val_mse", mse, on_step=True, on_epoch=False)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.net.parameters(), lr=self.lr)


class Pair:
    """A batch as a plain object, not a tensor or a collection of them."""

    def __init__(self, items: list[Batch]) -> None:
        self.x = torch.stack([x for x, _ in items])
        self.y = torch.stack([y for _, y in items])


class OpaqueBatches(BlobData):
    """BlobData whose training batches are Pair objects."""

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=self.batch_size, collate_fn=Pair)


class OpaqueStep(DictStep):
    """DictStep reading Pair batches."""

    def training_step(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        return super().training_step((batch.x, batch.y), batch_idx)


class ForkedLogs(DictStep):
    """DictStep that also logs its training accuracy on step and on epoch."""

    def training_step(self, batch: Any, batch_idx: int) -> dict[str, Any]:
        out = super().training_step(batch, batch_idx)
        self.log("acc", out["acc"], on_step=True, on_epoch=True)
        return out
