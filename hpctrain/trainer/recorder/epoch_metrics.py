"""What the module logged in an epoch, by its own names: epoch values, per-step means, the loss."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch

from hpctrain.trainer.facts import batch_size_of
from hpctrain.trainer.logged import (
    RETURNED_LOSS,
    StepMeans,
    epoch_values,
    number,
    returned_loss,
)
from hpctrain.trainer.records import PartialEpoch

Metrics = dict[str, float | None]


class EpochMetrics:
    """Collects an epoch's metrics on the device; nothing is read back until the epoch ends."""

    def __init__(self) -> None:
        self.train_steps = StepMeans()
        self.val_steps = StepMeans()
        # This epoch's validation metrics, None until a validation (not the sanity check) ended.
        self.validation: Metrics | None = None
        self.loss_sum: torch.Tensor | None = None
        self.loss_weight = 0.0

    def start_epoch(self) -> None:
        self.train_steps.reset()
        self.validation = None
        self.loss_sum, self.loss_weight = None, 0.0

    def train_batch_end(self, trainer: L.Trainer, outputs: Any, samples: int | None) -> None:
        """Take the loss training_step returned (weighted by the batch's samples) and the
        values it logged per step."""
        loss = returned_loss(outputs)
        if loss is not None:
            weight = float(samples or 1)
            weighted = loss.float() * weight
            self.loss_sum = weighted if self.loss_sum is None else self.loss_sum + weighted
            self.loss_weight += weight
        self.train_steps.add(trainer, "train", samples)

    def validation_start(self) -> None:
        self.val_steps.reset()

    def validation_batch_end(self, trainer: L.Trainer, batch: Any) -> None:
        self.val_steps.add(trainer, "val", batch_size_of(batch))

    def validation_end(self, trainer: L.Trainer) -> None:
        self.validation = {**epoch_values(trainer, "val"), **self.val_steps.means()}

    def loss_on(self, device: torch.device) -> torch.Tensor:
        """This rank's loss sum as a 0-d tensor on `device`, for the epoch's one all-reduce."""
        return self.loss_sum if self.loss_sum is not None else torch.zeros((), device=device)

    def epoch(self, trainer: L.Trainer, returned: bool, mean_loss: float | None) -> Metrics:
        """The epoch's metrics: the returned loss (unless logged under that name), the values
        logged per epoch, the per-step means, then validation's."""
        train = epoch_values(trainer, "train")
        steps = self.train_steps.means()
        metrics: Metrics = {}
        if returned and RETURNED_LOSS not in train and RETURNED_LOSS not in steps:
            metrics[RETURNED_LOSS] = mean_loss
        return {**metrics, **train, **steps, **(self.validation or {})}

    def save_partial(self, partial: PartialEpoch) -> None:
        """Put this epoch's sums so far into a mid-epoch checkpoint's record."""
        partial.loss = (number(self.loss_sum) or 0.0, self.loss_weight)
        partial.step_means = self.train_steps.state()

    def restore(self, partial: PartialEpoch, device: torch.device) -> None:
        """Continue the epoch a mid-epoch checkpoint was saved in."""
        total, weight = partial.loss
        if weight:
            self.loss_sum = torch.tensor(total, device=device)
            self.loss_weight = weight
        self.train_steps.restore(partial.step_means, device)
