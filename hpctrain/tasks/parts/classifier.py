"""The LightningModule that trains the built-in networks (tasks/parts/networks.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import lightning as L
import torch
from torch import nn

from hpctrain.errors import ConfigError
from hpctrain.tasks.parts import fastpath, graphs
from hpctrain.tasks.parts.networks import build_optimizer

# Settings are read, never built, here: no pydantic at import.
if TYPE_CHECKING:
    from hpctrain.trainsettings.sections import OptimConfig, TrainSettings


class Classifier(L.LightningModule):
    """Cross-entropy training of a built-in network, with epoch metrics and no per-step syncs."""

    def __init__(
        self,
        network: nn.Module,
        optim: OptimConfig,
        lr: float,
        gradient_clip_val: float | None = None,
        accumulate: int = 1,
        cuda_graphs: bool | str = "auto",
    ) -> None:
        super().__init__()
        self.net = network
        self.optim = optim
        self.lr = lr
        self.gradient_clip_val = gradient_clip_val
        # Batches per optimizer step: manual optimization accumulates itself (Lightning's
        # accumulate_grad_batches applies to automatic optimization only).
        self.accumulate = accumulate
        self.cuda_graphs = cuda_graphs
        # "on", or "off: <why>" once the optimizer exists; metrics.json and the banner show it.
        self.cuda_graphs_state = "off: not started"
        self._graphed: graphs.GraphedStep | None = None
        # Manual optimization: Lightning's automatic-optimization closure machinery costs tens of
        # microseconds per step, a large share of a small model's step on a CPU.
        self.automatic_optimization = False
        self.loss_fn = nn.CrossEntropyLoss(reduction="sum")
        # Loss sums stay on the device and are reduced once per epoch, so that no training step
        # waits for the device or the other ranks; counts are plain ints.
        self._train_loss = torch.zeros(())
        self._train_count = 0
        self._val_loss = torch.zeros(())
        self._val_correct = torch.zeros(())
        self._val_count = 0
        self._batch: int | None = None
        self._chunk = 1
        self._direct = False

    def __setattr__(self, name: str, value: Any) -> None:
        # Lightning sets _current_fx_name around every hook, ~40 times per step; nn.Module's
        # __setattr__ costs microseconds each, a visible share of a small model's step.
        if name == "_current_fx_name":
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        optimizer = build_optimizer(self.parameters(), self.optim, self.lr)
        why = "trainer.cuda_graphs=false"
        if self.cuda_graphs is not False:
            why = graphs.unavailable(self.trainer, self, optimizer) or ""
        if why and self.cuda_graphs is True:
            raise ConfigError(f"trainer.cuda_graphs=true, but this run cannot use them: {why}",
                              "set trainer.cuda_graphs=auto (or false)")
        self.cuda_graphs_state = f"off: {why}" if why else "on"
        return optimizer

    def on_train_start(self) -> None:
        # The data module serves chunks of `chunk` batches of `batch_size` (1 and the whole
        # batch without a data module).
        data = getattr(self.trainer, "datamodule", None)
        self._batch = getattr(data, "batch_size", None)
        self._chunk = getattr(data, "chunk", 1)
        self._direct = fastpath.hooks_do_nothing(self.trainer)
        self._graphed = None
        if self.cuda_graphs_state == "on" and self._batch:
            optimizer = self.optimizers()
            assert isinstance(optimizer, L.pytorch.core.optimizer.LightningOptimizer)
            self._graphed = graphs.GraphedStep(
                self.net, self.loss_fn, optimizer.optimizer, self._batch
            )
        # Lightning skips on_train_epoch_start when it resumes in the middle of an epoch.
        self.on_train_epoch_start()

    def on_train_epoch_start(self) -> None:
        self._train_loss = torch.zeros((), device=self.device)
        self._train_count = 0

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        optimizer = self.optimizers()
        assert isinstance(optimizer, L.pytorch.core.optimizer.LightningOptimizer)
        # A chunk of several batches (datasets/resident.py): one optimizer step per batch, so
        # that Lightning's fixed work per call is paid once per chunk.
        size = self._batch or max(y.shape[0], 1)
        count = -(-y.shape[0] // size)
        last_call = batch_idx + 1 >= self.trainer.num_training_batches
        for j in range(count):
            part = slice(j * size, (j + 1) * size)
            last = last_call and j == count - 1
            self._train_batch(optimizer, x[part], y[part], batch_idx * self._chunk + j, last)

    def _train_batch(
        self,
        optimizer: L.pytorch.core.optimizer.LightningOptimizer,
        x: torch.Tensor,
        y: torch.Tensor,
        batch_idx: int,
        last: bool,
    ) -> None:
        n = y.shape[0]
        if self._graphed is not None and n == self._graphed.batch:
            self._train_loss.add_(self._graphed(x, y))
            self._train_count += n
            fastpath.count_step(optimizer)
            return
        acc = self.accumulate
        if batch_idx % acc == 0:
            optimizer.zero_grad()
        loss_sum = self.loss_fn(self.net(x), y)
        # The strategy's backward, not a bare loss.backward(): under DDP it prepares the gradient
        # all-reduce. Divided by the accumulation too: the step sees the mean over all its batches.
        loss = loss_sum / (max(n, 1) * acc)
        if self._direct:
            fastpath.backward(self.trainer, loss)
        else:
            self.manual_backward(loss)
        self._train_loss.add_(loss_sum.detach())
        self._train_count += n
        if acc > 1 and (batch_idx + 1) % acc and not last:
            return
        if self.gradient_clip_val is not None:
            self.clip_gradients(optimizer.optimizer, gradient_clip_val=self.gradient_clip_val)
        if self._direct:
            fastpath.step(optimizer)
        else:
            optimizer.step()

    def on_train_epoch_end(self) -> None:
        stats = torch.stack([self._train_loss, self._count_tensor(self._train_count)])
        total = self.trainer.strategy.reduce(stats, reduce_op="sum")
        self.log("train_loss", total[0] / total[1].clamp(min=1), prog_bar=True)

    def on_validation_epoch_start(self) -> None:
        self._val_loss = torch.zeros((), device=self.device)
        self._val_correct = torch.zeros((), device=self.device)
        self._val_count = 0

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self.net(x)
        self._val_loss.add_(self.loss_fn(logits, y))
        self._val_correct.add_((logits.argmax(dim=1) == y).sum())
        self._val_count += y.shape[0]

    def on_validation_epoch_end(self) -> None:
        stats = torch.stack(
            [self._val_loss, self._val_correct, self._count_tensor(self._val_count)]
        )
        total = self.trainer.strategy.reduce(stats, reduce_op="sum")
        count = total[2].clamp(min=1)
        self.log("val_loss", total[0] / count)
        self.log("val_acc", total[1] / count, prog_bar=True)

    def _count_tensor(self, count: int) -> torch.Tensor:
        return torch.tensor(float(count), device=self.device)


def classifier_for(network: nn.Module, config: TrainSettings, lr: float) -> Classifier:
    """The Classifier of a task that hpctrain's step drives, with the run's step settings."""
    t = config.trainer
    return Classifier(
        network, config.optim, lr, t.gradient_clip_val, t.accumulate_grad_batches or 1,
        t.cuda_graphs,
    )
