"""The safe stop: all ranks agree at a step boundary, save together, record, and end with 75."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Protocol

import lightning as L
import torch
import torch.distributed as dist
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.trainer.connectors.signal_connector import _SignalConnector

from hpctrain.trainer.callbacks import atomic_write_text
from hpctrain.trainer.records import StoppedEnd
from hpctrain.trainer.signals import (
    BY_FILE,
    NO_REQUEST,
    REASONS,
    StopSignals,
    TrainingStopped,
    read_stop_file,
    stop_exit_code,
)
from hpctrain.values import rundir
from hpctrain.values.rundir import RunDir


class _NoSignalConnector(_SignalConnector):
    """Lightning's signal connector, left with nothing to install: StopSignals is in charge."""

    # Lightning's own SIGTERM handler broadcasts inside the handler and its SLURM handler saves
    # and requeues from it, which can hang a multi-node job or leave a torn checkpoint
    # (Lightning issue 21406, PR 21407).
    def register_signal_handlers(self) -> None:
        return None

    def teardown(self) -> None:
        return None


def hand_signals_to_hpctrain(trainer: L.Trainer) -> None:
    """Stop Lightning from installing signal handlers or broadcasting its SIGTERM flag."""
    trainer._signal_connector = _NoSignalConnector(trainer)
    # Lightning 2.6 broadcasts that flag from rank 0 before every step, a collective and a device
    # sync per step; without its handler the flag never changes.
    epoch_loop = trainer.fit_loop.epoch_loop
    if hasattr(epoch_loop, "_broadcast_sigterm_tensor"):
        epoch_loop._broadcast_sigterm_tensor = lambda: None  # type: ignore[method-assign]


class StopRecorder(Protocol):
    """What the safe stop needs of the recorder (recorder.run.RunRecorder)."""

    @property
    def run_dir(self) -> Path: ...

    def saved_at(self, global_step: int, mid_epoch: bool) -> bool: ...

    def record_stop(self, trainer: L.Trainer, end: StoppedEnd) -> None: ...


class SafeStop(Checkpoint):
    """Every N batches and at each epoch end, all ranks decide together whether to stop."""

    # A Checkpoint subclass listed after RunRecorder: Lightning runs it after the epoch's record
    # and last.ckpt, so a stop at an epoch end keeps that epoch.

    def __init__(
        self,
        signals: StopSignals,
        recorder: StopRecorder,
        every_n_steps: int,
        since: float,
        check_file: bool,
        launch: str,
    ) -> None:
        super().__init__()
        self.signals, self.recorder = signals, recorder
        self.every_n_steps, self.since = every_n_steps, since
        self.check_file, self.launch = check_file, launch
        self.run_dir: Path = recorder.run_dir
        self._batches = 0

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, out: Any, batch: Any, batch_idx: int
    ) -> None:
        self._batches += 1
        # The epoch's last batch is left to the epoch-end check right after its validation:
        # Lightning restarts an epoch that was saved on its last batch without validating it.
        if self._batches % self.every_n_steps or batch_idx + 1 >= trainer.num_training_batches:
            return
        self._check(trainer, batch_idx + 1)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        max_epochs = trainer.max_epochs
        if max_epochs is not None and trainer.current_epoch + 1 >= max_epochs:
            return  # training ends here anyway
        self._check(trainer, None)

    def _local_request(self) -> tuple[int, float]:
        reason, when = self.signals.reason, self.signals.time
        if self.check_file:
            found = read_stop_file(RunDir(self.run_dir).stop_requested, self.since)
            if found is not None:
                reason = max(reason, BY_FILE)
                when = found[1] if when is None else min(when, found[1])
        return reason, (math.inf if when is None else when)

    def _agree(self, trainer: L.Trainer) -> tuple[int, float]:
        """The most urgent reason on any rank and the earliest request time: one all-reduce."""
        reason, when = self._local_request()
        local = torch.tensor([reason, -when], dtype=torch.float64)
        if dist.is_available() and dist.is_initialized() and trainer.world_size > 1:
            local = local.to(trainer.strategy.root_device)
            dist.all_reduce(local, op=dist.ReduceOp.MAX)
        agreed_reason, neg_when = local.tolist()
        return int(agreed_reason), -neg_when

    def _check(self, trainer: L.Trainer, batches_done: int | None) -> None:
        """Stop here if any rank was asked to; `batches_done` is None at an epoch's end."""
        reason, requested = self._agree(trainer)
        if reason == NO_REQUEST:
            return
        decided = time.time()
        mid_epoch = batches_done is not None
        if not self.recorder.saved_at(trainer.global_step, mid_epoch):
            trainer.save_checkpoint(RunDir(self.run_dir).last_ckpt, weights_only=False)
        on_disk = time.time()
        done = trainer.num_training_batches if batches_done is None else batches_done
        end = self._end_record(trainer, reason, requested, decided, on_disk, done)
        if trainer.is_global_zero:
            self.recorder.record_stop(trainer, end)
            atomic_write_text(RunDir(self.run_dir).stop_saved, _stop_line(end))
            print(f"stop: {_stop_line(end).rstrip()}", flush=True)
        # Every rank leaves only once rank 0's records are on disk: srun --kill-on-bad-exit ends
        # the whole step as soon as the first rank exits.
        trainer.strategy.barrier("hpctrain.safe_stop")
        raise TrainingStopped(
            f"training stopped by {end.reason} at epoch {end.epoch}, "
            f"checkpoint {rundir.LAST_CKPT} saved",
            stop_exit_code(self.launch, trainer.global_rank),
        )

    def _end_record(
        self,
        trainer: L.Trainer,
        reason: int,
        requested: float,
        decided: float,
        on_disk: float,
        batches_done: int | float,
    ) -> StoppedEnd:
        known = math.isfinite(requested)
        return StoppedEnd(
            reason=REASONS[reason],
            epoch=trainer.current_epoch + 1,
            mid_epoch=batches_done < trainer.num_training_batches,
            batches_done_in_epoch=int(batches_done) if math.isfinite(batches_done) else None,
            global_step=trainer.global_step,
            requested_at=requested if known else None,
            checkpoint_at=on_disk,
            signal_to_checkpoint_s=on_disk - requested if known else None,
            decision_s=decided - requested if known else None,
            save_s=on_disk - decided,
            checkpoint=str(RunDir(self.run_dir).last_ckpt),
        )


def _stop_line(end: StoppedEnd) -> str:
    seconds = end.signal_to_checkpoint_s
    where = "mid-epoch" if end.mid_epoch else "at its end"
    return (
        f"{end.reason} at epoch {end.epoch} ({where}, step {end.global_step}); "
        f"{rundir.LAST_CKPT} on disk {'?' if seconds is None else f'{seconds:.3f}'} s "
        "after the request\n"
    )
