"""last.ckpt every N epochs, and best.ckpt when the metric it follows got better."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L

from hpctrain.trainer.best import BestChoice
from hpctrain.trainer.callbacks import atomic_copy
from hpctrain.trainer.logged import has_validation
from hpctrain.trainsettings.sections import CheckpointSection
from hpctrain.values.rundir import RunDir


@dataclass(frozen=True)
class BestRecord:
    """What best.ckpt holds, as metrics.json reports it."""

    metric: str | None
    mode: str | None
    score: float | None
    epoch: int | None
    note: str | None


class BestCheckpoint:
    """Chooses the metric best.ckpt follows (best.py), saves last.ckpt and best.ckpt."""

    def __init__(self, run_dir: Path, checkpoint: CheckpointSection) -> None:
        self.run_dir, self.ckpt = run_dir, checkpoint
        self.choice = BestChoice(checkpoint.monitor, checkpoint.mode)
        self.score: float | None = None
        self.epoch: int | None = None
        self._saved_step: int | None = None

    def record(self) -> BestRecord:
        c = self.choice
        return BestRecord(c.metric, c.mode, self.score, self.epoch, c.note)

    def state(self) -> dict[str, Any]:
        """The checkpoint's "hpctrain.RunRecorder" entries for the best checkpoint."""
        return {
            "best_score": self.score,
            "best_epoch": self.epoch,
            "best_metric": self.choice.metric,
            "best_mode": self.choice.mode,
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        # Older checkpoints do not record the metric: they followed checkpoint.monitor, whose
        # default then was val_acc (max).
        metric = state.get("best_metric", self.ckpt.monitor or "val_acc")
        mode = state.get("best_mode", self.ckpt.mode or "max")
        if self.choice.restore(metric, mode):
            self.score, self.epoch = state.get("best_score"), state.get("best_epoch")

    def saved_at(self, global_step: int, mid_epoch: bool) -> bool:
        """Whether last.ckpt already holds this point: saved at this epoch's end, at this step."""
        return not mid_epoch and self._saved_step == global_step

    def epoch_end(
        self,
        trainer: L.Trainer,
        epoch: int,
        metrics: Mapping[str, float | None],
        validation: Mapping[str, float | None] | None,
        say: Callable[[str], None],
    ) -> None:
        """Settle the metric once validation ran, then save as checkpoint.every_n_epochs says."""
        if not self.ckpt.enabled:
            return
        validated = validation is not None or not has_validation(trainer)
        line = self.choice.settle(list(metrics), list(validation or {}), validated)
        if line:
            say(line)
        if epoch % self.ckpt.every_n_epochs and epoch != trainer.max_epochs:
            return
        self._save(trainer, epoch, metrics)

    def _better(self, score: float | None) -> bool:
        if score is None:
            return False
        if self.score is None:
            return True
        return score > self.score if self.choice.mode == "max" else score < self.score

    def _save(self, trainer: L.Trainer, epoch: int, metrics: Mapping[str, float | None]) -> None:
        metric = self.choice.metric
        score = metrics.get(metric) if metric else None
        # Rank 0 decides: a custom module's unsynced metric may differ between ranks, and every
        # rank must take the same path through the barrier below.
        better, score = trainer.strategy.broadcast((self._better(score), score), src=0)
        if better:
            self.score, self.epoch = score, epoch
        where = RunDir(self.run_dir)
        trainer.save_checkpoint(where.last_ckpt, weights_only=False)
        self._saved_step = trainer.global_step
        if better:
            if trainer.is_global_zero:
                # A copy of the checkpoint just written: same state, no second serialization.
                atomic_copy(where.last_ckpt, where.best_ckpt)
            trainer.strategy.barrier("hpctrain.best_checkpoint")
