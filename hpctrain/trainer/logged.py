"""What a LightningModule logs, by its own names, read from Lightning's result collections.

The one module that reads Lightning internals for this (Lightning 2.x: the fit loop's
`_ResultCollection`s and their `_ResultMetric.meta`): `trainer.callback_metrics` alone cannot
tell an epoch value from a per-step one, nor a validation metric from a training one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import lightning as L
import torch

# The loss training_step returns (a tensor, or the "loss" of a dict), averaged over the epoch.
RETURNED_LOSS = "loss"
# Lightning's own suffix for the epoch aggregate of a value logged per step.
EPOCH_SUFFIX = "_epoch"


def number(value: Any) -> float | None:
    """A logged value as a float; None when it is missing or not finite (NaN, inf)."""
    if value is None:
        return None
    result = float(value.item() if isinstance(value, torch.Tensor) else value)
    return result if math.isfinite(result) else None


def _results(trainer: L.Trainer, phase: str) -> Any:
    epoch_loop = trainer.fit_loop.epoch_loop
    return getattr(epoch_loop if phase == "train" else epoch_loop.val_loop, "_results", None)


def _live(results: Any) -> Iterator[tuple[Any, str, str]]:
    """(metric, plain name, epoch name) of every value logged since the collection's reset."""
    if results is None:
        return
    for metric in list(results.values()):
        if not metric.has_reset:
            name, epoch_name = results._forked_name(metric, False)
            yield metric, name, epoch_name


def epoch_values(trainer: L.Trainer, phase: str) -> dict[str, float | None]:
    """The values the module logged with on_epoch=True in this phase, by their logged names."""
    callback = trainer.callback_metrics
    out: dict[str, float | None] = {}
    for metric, _, epoch_name in _live(_results(trainer, phase)):
        if metric.meta.on_epoch and epoch_name in callback:
            out[epoch_name] = number(callback[epoch_name])
    return out


def has_validation(trainer: L.Trainer) -> bool:
    """Whether the fit has a validation loader at all (module or data module)."""
    source = getattr(trainer.fit_loop.epoch_loop.val_loop, "_data_source", None)
    return bool(source is None or source.is_defined()) and trainer.limit_val_batches != 0


class StepMeans:
    """Values logged per step only (on_epoch=False), averaged over the epoch by batch size."""

    # Lightning keeps only the latest step of these; a sum on the device per name costs no sync.

    def __init__(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}
        self.weights: dict[str, float] = {}
        self._seen: dict[str, Any] = {}

    def reset(self) -> None:
        """Start a new epoch."""
        self.sums, self.weights, self._seen = {}, {}, {}

    def add(self, trainer: L.Trainer, phase: str, samples: int | None) -> None:
        """Take the values logged per step in the step that just ran."""
        weight = float(samples or 1)
        for metric, name, _ in _live(_results(trainer, phase)):
            value = metric._forward_cache
            # Lightning replaces the cached tensor on every log call: the same object means the
            # module did not log this name in this step.
            if metric.meta.on_epoch or not isinstance(value, torch.Tensor):
                continue
            if self._seen.get(name) is value:
                continue
            self._seen[name] = value
            key = name + EPOCH_SUFFIX
            contribution = value.detach().float() * weight
            self.sums[key] = self.sums[key] + contribution if key in self.sums else contribution
            self.weights[key] = self.weights.get(key, 0.0) + weight

    def means(self) -> dict[str, float | None]:
        """The epoch means so far (this rank's steps)."""
        return {k: number(self.sums[k] / self.weights[k]) for k in self.sums}

    def state(self) -> dict[str, tuple[float, float]]:
        """Plain numbers for a mid-epoch checkpoint."""
        return {k: (float(self.sums[k].item()), self.weights[k]) for k in self.sums}

    def restore(self, state: Mapping[str, Any], device: torch.device) -> None:
        """Continue an epoch from a mid-epoch checkpoint's numbers."""
        for key, (total, weight) in state.items():
            self.sums[key] = torch.tensor(float(total), device=device)
            self.weights[key] = float(weight)


def returned_loss(outputs: Any) -> torch.Tensor | None:
    """The loss training_step returned, as Lightning hands it to on_train_batch_end."""
    loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
    return loss.detach() if isinstance(loss, torch.Tensor) and loss.numel() == 1 else None
