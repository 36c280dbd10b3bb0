"""Per-epoch bookkeeping: throughput, console lines, atomic checkpoints and metrics.json."""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch.callbacks import Checkpoint

from hpctrain import __version__
from hpctrain.trainer.config import CheckpointSection
from hpctrain.trainer.signals import TrainingStopped

LAST = "last.ckpt"
BEST = "best.ckpt"
METRICS = "metrics.json"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# mkstemp creates files readable by the owner only; results should follow the umask as
# open() would, so that a group can read a shared run directory.
_FILE_MODE = 0o666 & ~_umask()


def atomic_write_bytes(path: Path, write: Callable[[Any], None]) -> None:
    """Write a file through `write(fileobj)` to a temporary sibling, fsync, then rename it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_name, path)
        _fsync_directory(path.parent)
    finally:
        Path(tmp_name).unlink(missing_ok=True)


def _fsync_directory(directory: Path) -> None:
    # The rename is durable only once its directory is: a stop reports the checkpoint as on disk.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some network filesystems refuse fsync on a directory
    finally:
        os.close(fd)


def atomic_copy(source: Path, target: Path) -> None:
    """Copy a file atomically (temporary sibling + rename)."""

    def copy(out: Any) -> None:
        with source.open("rb") as f:
            shutil.copyfileobj(f, out)

    atomic_write_bytes(target, copy)


def atomic_write_text(path: Path, text: str) -> None:
    """Write a text file atomically (temporary sibling + rename)."""
    atomic_write_bytes(path, lambda f: f.write(text.encode("utf-8")))


class AtomicCheckpointIO(TorchCheckpointIO):
    """torch.save to a temporary file beside the target, then os.replace: no torn checkpoints."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None
    ) -> None:
        if storage_options is not None:
            raise TypeError("AtomicCheckpointIO does not take storage_options")
        atomic_write_bytes(Path(path), lambda f: torch.save(checkpoint, f))


def batch_size_of(batch: Any) -> int:
    """The number of samples in a batch: the first dimension of its first tensor."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.ndim else 1
    if isinstance(batch, (list, tuple)):
        return batch_size_of(batch[0]) if batch else 0
    if isinstance(batch, dict):
        return batch_size_of(next(iter(batch.values()))) if batch else 0
    return 0


def _number(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value.item() if isinstance(value, torch.Tensor) else value)
    return number if math.isfinite(number) else None


def _fmt(value: float | None, digits: int = 4) -> str:
    return "nan" if value is None else f"{value:.{digits}f}"


class RunRecorder(Checkpoint):
    """Times epochs, saves last.ckpt/best.ckpt, prints epoch lines and writes metrics.json."""

    # A Checkpoint subclass on purpose: Lightning runs checkpoint callbacks after the module's
    # on_train_epoch_end, so the epoch's train_loss is logged by the time this one reads it.

    def __init__(
        self,
        run_dir: Path,
        task: str,
        checkpoint: CheckpointSection,
        print_lines: bool,
        banner: Callable[[L.Trainer], str],
        resumed_from: Path | None = None,
        static: dict[str, Any] | None = None,
        epochs: list[dict[str, Any]] | None = None,
        restarts: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        self.run_dir, self.task, self.ckpt = run_dir, task, checkpoint
        self.print_lines = print_lines
        self.banner = banner
        self.resumed_from = resumed_from
        self.static = static or {}
        self.best_score: float | None = None
        self.best_epoch: int | None = None
        # Earlier segments' epochs the checkpoint covers, and every start of the run, this last.
        self.epochs: list[dict[str, Any]] = list(epochs or [])
        self.restarts: list[dict[str, Any]] = list(restarts or [])
        self.summary: dict[str, Any] = {}
        self._fit_start = 0.0
        self._epoch_start = 0.0
        self._train_end: float | None = None
        self._samples = 0
        self._first_epoch: int | None = None
        self._warned_monitor = False
        self._epoch_open: int | None = None
        self._partial: dict[str, Any] | None = None
        self._saved_step: int | None = None

    @property
    def state_key(self) -> str:
        return "hpctrain.RunRecorder"

    def state_dict(self) -> dict[str, Any]:
        # A mid-epoch save keeps the epoch's progress so far, so that its record after a restart
        # counts the whole epoch (this rank's samples: every rank trains on an equal share).
        partial = None
        if self._epoch_open is not None:
            elapsed = time.perf_counter() - self._epoch_start
            partial = {"epoch": self._epoch_open, "samples": self._samples, "train_time_s": elapsed}
        return {
            "task": self.task,
            "best_score": self.best_score,
            "best_epoch": self.best_epoch,
            "partial_epoch": partial,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.best_score = state_dict.get("best_score")
        self.best_epoch = state_dict.get("best_epoch")
        self._partial = state_dict.get("partial_epoch")

    def _sync(self, trainer: L.Trainer) -> None:
        if trainer.strategy.root_device.type == "cuda":
            torch.cuda.synchronize(trainer.strategy.root_device)

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._fit_start = time.perf_counter()
        if trainer.is_global_zero:
            print(self.banner(trainer), flush=True)
            self._write_metrics(trainer, "running")

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Lightning skips on_train_epoch_start when it resumes in the middle of an epoch.
        self._first_epoch = trainer.current_epoch + 1
        self._start_epoch(trainer)
        partial = self._partial
        if partial is not None and partial.get("epoch") == self._epoch_open:
            self._samples = int(partial["samples"])
            self._epoch_start -= float(partial["train_time_s"])

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start_epoch(trainer)

    def _start_epoch(self, trainer: L.Trainer) -> None:
        self._sync(trainer)
        self._epoch_start = time.perf_counter()
        self._train_end = None
        self._samples = 0
        self._epoch_open = trainer.current_epoch + 1

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        # Counted before the step, so that a save from any callback's batch-end hook includes it.
        self._samples += batch_size_of(batch)

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
            self._sync(trainer)
            self._train_end = time.perf_counter()

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking and self._train_end is None:
            self._sync(trainer)
            self._train_end = time.perf_counter()

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._train_end is None:
            self._sync(trainer)
            self._train_end = time.perf_counter()
        train_time = self._train_end - self._epoch_start
        # One collective per epoch: the samples every rank trained on.
        counted = torch.tensor(float(self._samples), device=trainer.strategy.root_device)
        samples = int(_number(trainer.strategy.reduce(counted, reduce_op="sum")) or 0)
        epoch = trainer.current_epoch + 1
        metrics = trainer.callback_metrics
        record = {
            "epoch": epoch,
            "train_loss": _number(metrics.get("train_loss")),
            "val_loss": _number(metrics.get("val_loss")),
            "val_acc": _number(metrics.get("val_acc")),
            "samples": samples,
            "train_time_s": train_time,
            "samples_per_s": samples / train_time if train_time > 0 else None,
        }
        self._epoch_open = None
        self._save_checkpoints(trainer, epoch)
        record["time_s"] = time.perf_counter() - self._epoch_start
        self.epochs.append(record)
        if trainer.is_global_zero:
            if self.print_lines:
                print(self._line(record, trainer.max_epochs), flush=True)
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
        epochs = self.epochs[-1]["epoch"] if self.epochs else trainer.current_epoch
        self._end(trainer, {"how": "completed", "epochs": epochs}, "completed")

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        # A safe stop has recorded itself; anything else ends the segment as a failure.
        if trainer.is_global_zero and not isinstance(exception, TrainingStopped):
            error = f"{type(exception).__name__}: {exception}".strip()
            self._end(trainer, {"how": "failed", "error": error}, "failed")

    def _line(self, record: dict[str, Any], max_epochs: int | None) -> str:
        sps = record["samples_per_s"]
        parts = [
            f"epoch {record['epoch']}/{max_epochs}",
            f"train_loss={_fmt(record['train_loss'])}",
            f"val_loss={_fmt(record['val_loss'])}",
            f"val_acc={_fmt(record['val_acc'])}",
            f"samples/s={'nan' if sps is None else f'{sps:.0f}'}",
            f"time={record['time_s']:.2f}s",
        ]
        return " ".join(parts)

    def _save_checkpoints(self, trainer: L.Trainer, epoch: int) -> None:
        if not self.ckpt.enabled:
            return
        if epoch % self.ckpt.every_n_epochs and epoch != trainer.max_epochs:
            return
        score = _number(trainer.callback_metrics.get(self.ckpt.monitor))
        if score is None and not self._warned_monitor and trainer.is_global_zero:
            self._warned_monitor = True
            print(
                f"note: metric {self.ckpt.monitor!r} is not logged; only {LAST} is saved",
                flush=True,
            )
        better = score is not None and (
            self.best_score is None
            or (score > self.best_score if self.ckpt.mode == "max" else score < self.best_score)
        )
        # Rank 0 decides: a custom module's unsynced metric may differ between ranks, and every
        # rank must take the same path through the barrier below.
        better, score = trainer.strategy.broadcast((better, score), src=0)
        if better:
            self.best_score, self.best_epoch = score, epoch
        trainer.save_checkpoint(self.run_dir / LAST, weights_only=False)
        self._saved_step = trainer.global_step
        if better:
            if trainer.is_global_zero:
                # A copy of the checkpoint just written: same state, no second serialization.
                atomic_copy(self.run_dir / LAST, self.run_dir / BEST)
            trainer.strategy.barrier("hpctrain.best_checkpoint")

    def _write_metrics(self, trainer: L.Trainer, status: str) -> None:
        last = self.epochs[-1] if self.epochs else {}
        train_time = sum(e["train_time_s"] for e in self.epochs)
        samples = sum(e["samples"] for e in self.epochs)
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
            "wall_time_s": time.perf_counter() - self._fit_start,
            "epoch_times_s": [e["time_s"] for e in self.epochs],
            "samples_per_s": samples / train_time if train_time > 0 else None,
            "epoch_samples_per_s": [e["samples_per_s"] for e in self.epochs],
            "final_train_loss": last.get("train_loss"),
            "final_val_loss": last.get("val_loss"),
            "final_val_acc": last.get("val_acc"),
            "best_val_metric": self.ckpt.monitor,
            "best_val_score": self.best_score,
            "best_epoch": self.best_epoch,
            "epochs": self.epochs,
            "restarts": self.restarts,
        }
        atomic_write_text(self.run_dir / METRICS, json.dumps(self.summary, indent=2) + "\n")
