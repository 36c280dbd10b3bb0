"""Per-epoch bookkeeping: what the module logged, throughput, epoch lines, checkpoints."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Checkpoint

from hpctrain import __version__, rundir
from hpctrain.trainconfig.model import CheckpointSection
from hpctrain.trainer.best import BestChoice
from hpctrain.trainer.callbacks import atomic_copy, atomic_write_text
from hpctrain.trainer.facts import (
    SAMPLES_COUNTED_AS,
    UNKNOWN,
    batch_size_of,
    learning_rates,
    lr_text,
    lr_value,
    optimizer_text,
    train_batch_size,
)
from hpctrain.trainer.logged import (
    RETURNED_LOSS,
    StepMeans,
    epoch_values,
    has_validation,
    number,
    returned_loss,
)
from hpctrain.trainer.signals import TrainingStopped


def fmt(value: float | None) -> str:
    """A metric for the epoch line: 4 decimals, or 4 significant digits when tiny or huge."""
    if value is None:
        return "nan"
    if value == 0 or 1e-3 <= abs(value) < 1e6:
        return f"{value:.4f}"
    return f"{value:.4e}"


def epoch_line(record: dict[str, Any], max_epochs: int | None) -> str:
    """One grep-able line per epoch: the logged metrics by their names, throughput, time."""
    sps = record["samples_per_s"]
    parts = [f"epoch {record['epoch']}/{max_epochs}"]
    parts += [f"{name}={fmt(value)}" for name, value in record["metrics"].items()]
    parts.append(f"samples/s={UNKNOWN if sps is None else f'{sps:.0f}'}")
    parts.append(f"time={record['time_s']:.2f}s")
    return " ".join(parts)


def latest_metrics(epochs: list[dict[str, Any]]) -> dict[str, float | None]:
    """Every metric's value in the latest epoch that logged it, in first-logged order."""
    latest: dict[str, float | None] = {}
    for record in epochs:
        for name, value in (record.get("metrics") or {}).items():
            latest[name] = value
    return latest


class RunRecorder(Checkpoint):
    """Times epochs, saves last.ckpt/best.ckpt, prints epoch lines and writes metrics.json."""

    # A Checkpoint subclass on purpose: Lightning runs checkpoint callbacks after the module's
    # on_train_epoch_end, so what the module logs there is in by the time this one reads it.

    def __init__(
        self,
        run_dir: Path,
        task: str,
        checkpoint: CheckpointSection,
        print_lines: bool,
        banner: Callable[[L.Trainer, dict[str, Any]], str],
        resumed_from: Path | None = None,
        static: dict[str, Any] | None = None,
        epochs: list[dict[str, Any]] | None = None,
        restarts: list[dict[str, Any]] | None = None,
        startup: tuple[float, str, float | None] | None = None,
    ) -> None:
        super().__init__()
        # (origin wall time, what the origin is, when the trainer's imports were done).
        self._startup = startup
        self.startup: dict[str, Any] = {
            "startup_s": None, "startup_from": None, "startup_imports_s": None
        }
        self.run_dir, self.task, self.ckpt = run_dir, task, checkpoint
        self.print_lines, self.banner = print_lines, banner
        self.resumed_from = resumed_from
        self.static = static or {}
        self.best = BestChoice(checkpoint.monitor, checkpoint.mode)
        self.best_score: float | None = None
        self.best_epoch: int | None = None
        # Earlier segments' epochs the checkpoint covers, and every start of the run, this last.
        self.epochs: list[dict[str, Any]] = list(epochs or [])
        self.restarts: list[dict[str, Any]] = list(restarts or [])
        self.summary: dict[str, Any] = {}
        self.facts: dict[str, Any] = {}
        self._fit_start = time.perf_counter()
        self._first_epoch: int | None = None
        self._epoch_open: int | None = None
        self._partial: dict[str, Any] | None = None
        self._saved_step: int | None = None
        self._steps = {"train": StepMeans(), "val": StepMeans()}
        self._val_metrics: dict[str, float | None] | None = None
        self._epoch_lr: Any = UNKNOWN
        self._reset_epoch()

    def _reset_epoch(self) -> None:
        self._epoch_start = time.perf_counter()
        self._train_end: float | None = None
        self._samples = 0
        self._uncounted = 0
        self._batch_samples: int | None = None
        self._loss_sum: torch.Tensor | None = None
        self._loss_weight = 0.0
        self._steps["train"].reset()
        self._val_metrics = None

    @property
    def state_key(self) -> str:
        return "hpctrain.RunRecorder"

    def state_dict(self) -> dict[str, Any]:
        # A mid-epoch save keeps the epoch's progress so far, so that its record after a restart
        # counts the whole epoch (this rank's samples: every rank trains on an equal share).
        partial = None
        if self._epoch_open is not None:
            partial = {
                "epoch": self._epoch_open,
                "samples": self._samples,
                "uncounted": self._uncounted,
                "train_time_s": time.perf_counter() - self._epoch_start,
                "loss": [number(self._loss_sum) or 0.0, self._loss_weight],
                "step_means": self._steps["train"].state(),
            }
        return {
            "task": self.task,
            "best_score": self.best_score,
            "best_epoch": self.best_epoch,
            "best_metric": self.best.metric,
            "best_mode": self.best.mode,
            "partial_epoch": partial,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # Older checkpoints do not record the metric: they followed checkpoint.monitor, whose
        # default then was val_acc (max).
        metric = state_dict.get("best_metric", self.ckpt.monitor or "val_acc")
        mode = state_dict.get("best_mode", self.ckpt.mode or "max")
        if self.best.restore(metric, mode):
            self.best_score = state_dict.get("best_score")
            self.best_epoch = state_dict.get("best_epoch")
        self._partial = state_dict.get("partial_epoch")

    def _sync(self, trainer: L.Trainer) -> None:
        if trainer.strategy.root_device.type == "cuda":
            torch.cuda.synchronize(trainer.strategy.root_device)

    def _end_train_phase(self, trainer: L.Trainer) -> float:
        self._sync(trainer)
        self._train_end = time.perf_counter()
        return self._train_end

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._fit_start = time.perf_counter()

    def read_facts(self, trainer: L.Trainer) -> None:
        """Batch size and learning rates as the run has them (loaders and optimizers set up)."""
        batch = train_batch_size(trainer)
        rates = learning_rates(trainer)
        acc = trainer.accumulate_grad_batches
        if not trainer.lightning_module.automatic_optimization:
            # The built-in modules optimize manually and accumulate themselves.
            acc = getattr(trainer.lightning_module, "accumulate", acc)
        effective = batch * trainer.world_size * acc if batch else None
        data = getattr(trainer, "datamodule", None) if self.task != "custom" else None
        self.facts = {
            "batch_size_per_device": batch or UNKNOWN,
            "accumulate_grad_batches": acc,
            # Built-in tasks: batches per training_step call, and whether the data is on the device.
            "batches_per_call": getattr(data, "chunk", 1),
            "data_on_device": getattr(data, "resident", None),
            # Built-in tasks: "on", or "off: <why>" (trainer.cuda_graphs).
            "cuda_graphs": getattr(trainer.lightning_module, "cuda_graphs_state", None),
            "effective_batch_size": effective or UNKNOWN,
            "learning_rate": lr_value(rates),
            "learning_rate_text": lr_text(rates),
            "optimizers": optimizer_text(trainer),
            "samples_counted_as": SAMPLES_COUNTED_AS,
        }

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.read_facts(trainer)
        if trainer.is_global_zero:
            print(self.banner(trainer, self.facts), flush=True)
            self._write_metrics(trainer, "running")
        # Lightning skips on_train_epoch_start when it resumes in the middle of an epoch.
        self._first_epoch = trainer.current_epoch + 1
        self._start_epoch(trainer)
        partial = self._partial
        if partial is not None and partial.get("epoch") == self._epoch_open:
            self._samples = int(partial["samples"])
            self._uncounted = int(partial.get("uncounted", 0))
            self._epoch_start -= float(partial["train_time_s"])
            device = trainer.strategy.root_device
            total, weight = partial.get("loss", (0.0, 0.0))
            if weight:
                self._loss_sum = torch.tensor(float(total), device=device)
                self._loss_weight = float(weight)
            self._steps["train"].restore(partial.get("step_means", {}), device)

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start_epoch(trainer)

    def _start_epoch(self, trainer: L.Trainer) -> None:
        self._sync(trainer)
        self._reset_epoch()
        self._epoch_open = trainer.current_epoch + 1
        # The rate this epoch starts with: an epoch scheduler steps before the epoch's end hooks.
        self._epoch_lr = lr_value(learning_rates(trainer))

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self._startup is not None:
            self._note_startup(trainer)
        # Counted before the step, so that a save from any callback's batch-end hook includes it.
        self._batch_samples = batch_size_of(batch)
        if self._batch_samples is None:
            self._uncounted += 1
        else:
            self._samples += self._batch_samples

    def _note_startup(self, trainer: L.Trainer) -> None:
        assert self._startup is not None
        origin, label, imported = self._startup
        self._startup = None
        now = time.time()
        imports = imported - origin if imported is not None else None
        self.startup = {
            "startup_s": now - origin, "startup_from": label, "startup_imports_s": imports
        }
        if trainer.is_global_zero:
            detail = f" (imports {imports:.2f} s)" if imports is not None else ""
            print(f"startup: first training step {now - origin:.2f} s after the {label}{detail}",
                  flush=True)

    def on_train_batch_end(
        self,
        trainer: L.Trainer,
        pl_module: L.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if batch_idx + 1 >= trainer.num_training_batches:
            # The train phase ends here, before Lightning sets up validation.
            self._end_train_phase(trainer)
        loss = returned_loss(outputs)
        if loss is not None:
            weight = float(self._batch_samples or 1)
            weighted = loss.float() * weight
            self._loss_sum = weighted if self._loss_sum is None else self._loss_sum + weighted
            self._loss_weight += weight
        self._steps["train"].add(trainer, "train", self._batch_samples)

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self._steps["val"].reset()
        if self._train_end is None:
            self._end_train_phase(trainer)

    def on_validation_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, *_: Any
    ) -> None:
        if not trainer.sanity_checking:
            self._steps["val"].add(trainer, "val", batch_size_of(batch))

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._val_metrics = {**epoch_values(trainer, "val"), **self._steps["val"].means()}

    def _reduce(self, trainer: L.Trainer) -> tuple[int | None, bool, float | None]:
        """Samples of all ranks, whether a loss was returned, its mean: one collective."""
        device = trainer.strategy.root_device
        loss = self._loss_sum if self._loss_sum is not None else torch.zeros((), device=device)
        counts = torch.tensor(
            [float(self._samples), float(self._uncounted), self._loss_weight], device=device
        )
        stacked = torch.cat([counts, loss.reshape(1).float()])
        total = trainer.strategy.reduce(stacked, reduce_op="sum")
        samples, uncounted, weight, loss_sum = (float(v) for v in total.tolist())
        mean = number(loss_sum / weight) if weight else None
        return (None if uncounted else int(samples)), weight > 0, mean

    def _epoch_metrics(
        self, trainer: L.Trainer, returned: bool, loss: float | None
    ) -> dict[str, float | None]:
        train = epoch_values(trainer, "train")
        steps = self._steps["train"].means()
        metrics: dict[str, float | None] = {}
        if returned and RETURNED_LOSS not in train and RETURNED_LOSS not in steps:
            metrics[RETURNED_LOSS] = loss
        return {**metrics, **train, **steps, **(self._val_metrics or {})}

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        train_end = self._train_end or self._end_train_phase(trainer)
        train_time = train_end - self._epoch_start
        samples, returned, loss = self._reduce(trainer)
        epoch = trainer.current_epoch + 1
        record = {
            "epoch": epoch,
            "metrics": self._epoch_metrics(trainer, returned, loss),
            "samples": samples,
            "learning_rate": self._epoch_lr,
            "train_time_s": train_time,
            "samples_per_s": samples / train_time if samples and train_time > 0 else None,
        }
        self._epoch_open = None
        self._save_checkpoints(trainer, epoch, record)
        record["time_s"] = time.perf_counter() - self._epoch_start
        self.epochs.append(record)
        if trainer.is_global_zero:
            if self.print_lines:
                print(epoch_line(record, trainer.max_epochs), flush=True)
            self._write_metrics(trainer, "running")

    def saved_at(self, global_step: int, mid_epoch: bool) -> bool:
        """Whether last.ckpt already holds this point: saved at this epoch's end, at this step."""
        return not mid_epoch and self._saved_step == global_step

    def _end(self, trainer: L.Trainer, end: dict[str, Any], status: str) -> None:
        if self.restarts:
            self.restarts[-1]["end"] = end
        self._write_metrics(trainer, status)

    def record_stop(self, trainer: L.Trainer, end: dict[str, Any]) -> None:
        """Record a safe stop as the end of this segment (rank 0)."""
        self._end(trainer, end, "stopped")

    def finish(self, trainer: L.Trainer) -> None:
        """Record that training is complete, also when the checkpoint already was (rank 0)."""
        if not self.facts:
            # Nothing trained (the checkpoint already holds max_epochs): say what the run is.
            self.read_facts(trainer)
            print(self.banner(trainer, self.facts), flush=True)
        epochs = self.epochs[-1]["epoch"] if self.epochs else trainer.current_epoch
        self._end(trainer, {"how": "completed", "epochs": epochs}, "completed")

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        # A safe stop has recorded itself; anything else ends the segment as a failure.
        if trainer.is_global_zero and not isinstance(exception, TrainingStopped):
            error = f"{type(exception).__name__}: {exception}".strip()
            self._end(trainer, {"how": "failed", "error": error}, "failed")

    def _choose_best(self, trainer: L.Trainer, metrics: dict[str, float | None]) -> None:
        validation = list(self._val_metrics or {})
        validated = self._val_metrics is not None or not has_validation(trainer)
        line = self.best.settle(list(metrics), validation, validated)
        if line and trainer.is_global_zero:
            print(line, flush=True)

    def _save_checkpoints(self, trainer: L.Trainer, epoch: int, record: dict[str, Any]) -> None:
        if not self.ckpt.enabled:
            return
        self._choose_best(trainer, record["metrics"])
        if epoch % self.ckpt.every_n_epochs and epoch != trainer.max_epochs:
            return
        metric = self.best.metric
        score = record["metrics"].get(metric) if metric else None
        better = score is not None and (
            self.best_score is None
            or (score > self.best_score if self.best.mode == "max" else score < self.best_score)
        )
        # Rank 0 decides: a custom module's unsynced metric may differ between ranks, and every
        # rank must take the same path through the barrier below.
        better, score = trainer.strategy.broadcast((better, score), src=0)
        if better:
            self.best_score, self.best_epoch = score, epoch
        trainer.save_checkpoint(self.run_dir / rundir.LAST_CKPT, weights_only=False)
        self._saved_step = trainer.global_step
        if better:
            if trainer.is_global_zero:
                # A copy of the checkpoint just written: same state, no second serialization.
                atomic_copy(self.run_dir / rundir.LAST_CKPT, self.run_dir / rundir.BEST_CKPT)
            trainer.strategy.barrier("hpctrain.best_checkpoint")

    def _write_metrics(self, trainer: L.Trainer, status: str) -> None:
        train_time = sum(e["train_time_s"] for e in self.epochs)
        counted = [e["samples"] for e in self.epochs]
        samples = sum(counted) if None not in counted else None
        latest = latest_metrics(self.epochs)
        facts = {k: v for k, v in self.facts.items() if k != "learning_rate_text"}
        self.summary = {
            "hpctrain_version": __version__,
            "task": self.task,
            "status": status,
            "world_size": trainer.world_size,
            "num_nodes": trainer.num_nodes,
            "devices_per_node": trainer.num_devices,
            "accelerator": "gpu" if trainer.strategy.root_device.type == "cuda" else "cpu",
            "epochs_completed": self.epochs[-1]["epoch"] if self.epochs else 0,
            "max_epochs": trainer.max_epochs,
            "first_epoch": self._first_epoch,
            "resumed_from": str(self.resumed_from) if self.resumed_from else None,
            **self.static,
            **facts,
            "wall_time_s": time.perf_counter() - self._fit_start,
            **self.startup,
            "epoch_times_s": [e["time_s"] for e in self.epochs],
            "samples_per_s": samples / train_time if samples and train_time > 0 else None,
            "epoch_samples_per_s": [e["samples_per_s"] for e in self.epochs],
            "logged_metrics": list(latest),
            **{f"final_{name}": value for name, value in latest.items()},
            "best_val_metric": self.best.metric,
            "best_val_mode": self.best.mode,
            "best_val_score": self.best_score,
            "best_epoch": self.best_epoch,
            "best_note": self.best.note,
            "epochs": self.epochs,
            "restarts": self.restarts,
        }
        atomic_write_text(self.run_dir / rundir.METRICS, json.dumps(self.summary, indent=2) + "\n")
