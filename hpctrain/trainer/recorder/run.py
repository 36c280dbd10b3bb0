"""RunRecorder: the one Lightning callback that drives the recorder's parts, in a fixed order."""

from __future__ import annotations

import time
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import Checkpoint

from hpctrain import progress
from hpctrain.trainer.facts import learning_rates, lr_value, read_facts
from hpctrain.trainer.logged import number
from hpctrain.trainer.recorder.best_checkpoint import BestCheckpoint
from hpctrain.trainer.recorder.console import Console
from hpctrain.trainer.recorder.epoch_metrics import EpochMetrics
from hpctrain.trainer.recorder.lines import startup_line
from hpctrain.trainer.recorder.metrics_file import MetricsFile, Status
from hpctrain.trainer.recorder.segments import Segments
from hpctrain.trainer.recorder.throughput import Throughput
from hpctrain.trainer.recorder.writer import MetricsWriter, RunIdentity, RunState
from hpctrain.trainer.records import (
    UNKNOWN,
    EpochRecord,
    Facts,
    LearningRate,
    PartialEpoch,
    RunHistory,
    StoppedEnd,
)
from hpctrain.trainer.signals import TrainingStopped
from hpctrain.trainer.startup import FirstStepClock, Origin
from hpctrain.trainsettings.sections import CheckpointSection

# Checkpoints keep the recorder's state under this key (read back on resume; resume.py reads
# its "task" to refuse another task's checkpoint).
STATE_KEY = "hpctrain.RunRecorder"


def _reduce(trainer: L.Trainer, throughput: Throughput,
            metrics: EpochMetrics) -> tuple[int | None, bool, float | None]:
    """Samples of all ranks, whether a loss was returned, its mean: one collective per epoch."""
    device = trainer.strategy.root_device
    counts = torch.tensor(
        [float(throughput.samples), float(throughput.uncounted), metrics.loss_weight],
        device=device,
    )
    stacked = torch.cat([counts, metrics.loss_on(device).reshape(1).float()])
    total = trainer.strategy.reduce(stacked, reduce_op="sum")
    samples, uncounted, weight, loss_sum = (float(v) for v in total.tolist())
    mean = number(loss_sum / weight) if weight else None
    return (None if uncounted else int(samples)), weight > 0, mean


def _epoch_record(trainer: L.Trainer, throughput: Throughput, metrics: EpochMetrics,
                  learning_rate: LearningRate) -> EpochRecord:
    """The epoch that just ended, over all ranks; its time_s is set once it is saved."""
    train_time = throughput.train_time(trainer)
    samples, returned, loss = _reduce(trainer, throughput, metrics)
    return EpochRecord(
        epoch=trainer.current_epoch + 1,
        metrics=metrics.epoch(trainer, returned, loss),
        samples=samples,
        learning_rate=learning_rate,
        train_time_s=train_time,
        samples_per_s=samples / train_time if samples and train_time > 0 else None,
    )


class RunRecorder(Checkpoint):
    """Times epochs, saves last.ckpt/best.ckpt, prints epoch lines and writes metrics.json."""

    # A Checkpoint subclass on purpose: Lightning runs checkpoint callbacks after the module's
    # on_train_epoch_end, so what the module logs there is in by the time this one reads it.
    # The parts are plain objects driven from here rather than callbacks of their own: their
    # order within a hook (the record, its write, then the save) is this code's, not the
    # callback list's, and one checkpoint key keeps their state.

    def __init__(self, identity: RunIdentity, checkpoint: CheckpointSection, console: Console,
                 history: RunHistory | None = None, startup: Origin | None = None) -> None:
        super().__init__()
        history = history or RunHistory()
        self.identity, self.run_dir, self.console = identity, identity.run_dir, console
        self.metrics, self.throughput = EpochMetrics(), Throughput()
        self.best = BestCheckpoint(identity.run_dir, checkpoint)
        self.segments = Segments(history.restarts)
        # Earlier segments' epochs the checkpoint covers, then this segment's.
        self.epochs: list[EpochRecord] = list(history.epochs)
        self.clock = FirstStepClock(startup)
        self.writer = MetricsWriter(identity)
        self.facts: Facts | None = None
        self._first_epoch: int | None = None
        self._epoch_open: int | None = None
        self._partial: PartialEpoch | None = None
        self._epoch_lr: LearningRate = UNKNOWN

    @property
    def state_key(self) -> str:
        return STATE_KEY

    def state_dict(self) -> dict[str, Any]:
        # A mid-epoch save keeps the epoch's progress so far, so that its record after a restart
        # counts the whole epoch.
        partial = None
        if self._epoch_open is not None:
            progress = PartialEpoch(self._epoch_open)
            self.throughput.save_partial(progress)
            self.metrics.save_partial(progress)
            partial = progress.to_state()
        return {"task": self.identity.task, **self.best.state(), "partial_epoch": partial}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.best.restore(state_dict)
        self._partial = PartialEpoch.from_state(state_dict.get("partial_epoch"))

    def summary(self) -> dict[str, Any]:
        """metrics.json as last written ({} on ranks other than 0, which write none)."""
        return self.writer.latest.to_json() if self.writer.latest else {}

    def _write(self, trainer: L.Trainer, status: Status) -> MetricsFile:
        return self.writer.write(trainer, RunState(
            status, self.epochs, self.segments.restarts, self.facts, self.clock.record,
            self.best.record(), self._first_epoch,
        ))

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.writer.fit_start = time.perf_counter()

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.facts = read_facts(trainer)
        self._first_epoch = trainer.current_epoch + 1
        if trainer.is_global_zero:
            self.console.banner(trainer, self.facts)
            self._write(trainer, "running")
        # Lightning skips on_train_epoch_start when it resumes in the middle of an epoch.
        self._start_epoch(trainer)
        if self._partial is not None and self._partial.epoch == self._epoch_open:
            self.throughput.restore(self._partial)
            self.metrics.restore(self._partial, trainer.strategy.root_device)

    def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start_epoch(trainer)

    def _start_epoch(self, trainer: L.Trainer) -> None:
        self.throughput.start_epoch(trainer)
        self.metrics.start_epoch()
        self._epoch_open = trainer.current_epoch + 1
        # The rate this epoch starts with: an epoch scheduler steps before the epoch's end hooks.
        self._epoch_lr = lr_value(learning_rates(trainer))

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        startup = self.clock.tick(time.time())
        if startup is not None:
            self.console.say(trainer, startup_line(startup))
        self.throughput.count(batch)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule,
                           outputs: Any, batch: Any, batch_idx: int) -> None:
        if batch_idx + 1 >= trainer.num_training_batches:
            # The train phase ends here, before Lightning sets up validation.
            self.throughput.end_train_phase(trainer)
        self.metrics.train_batch_end(trainer, outputs, self.throughput.batch_samples)
        progress.report(trainer.global_step)

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self.metrics.validation_start()
            if self.throughput.train_end is None:
                self.throughput.end_train_phase(trainer)

    def on_validation_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule,
                                outputs: Any, batch: Any, *_: Any) -> None:
        if not trainer.sanity_checking:
            self.metrics.validation_batch_end(trainer, batch)
        progress.report(trainer.global_step)  # validation is progress too (the stall watch)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self.metrics.validation_end(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        record = _epoch_record(trainer, self.throughput, self.metrics, self._epoch_lr)
        self._epoch_open = None  # whole now: a checkpoint from here has no partial epoch
        record.time_s = self.throughput.elapsed()
        self.epochs.append(record)
        # Written before last.ckpt holds it: killed between, the resumed run trains it again.
        if trainer.is_global_zero:
            self._write(trainer, "running")
        self.best.epoch_end(trainer, record.epoch, record.metrics, self.metrics.validation,
                            lambda line: self.console.say(trainer, line))
        self.console.epoch(trainer, record)

    def saved_at(self, global_step: int, mid_epoch: bool) -> bool:
        """Whether last.ckpt already holds this point: saved at this epoch's end, at this step."""
        return self.best.saved_at(global_step, mid_epoch)

    def record_stop(self, trainer: L.Trainer, end: StoppedEnd) -> None:
        """Record a safe stop as the end of this segment (rank 0)."""
        self.segments.stopped(end)
        self._write(trainer, "stopped")

    def finish(self, trainer: L.Trainer) -> MetricsFile:
        """Record that training is complete, also when the checkpoint already was (rank 0)."""
        if self.facts is None:
            # Nothing trained (the checkpoint already holds max_epochs): say what the run is.
            self.facts = read_facts(trainer)
            self.console.banner(trainer, self.facts)
        self.segments.completed(self.epochs[-1].epoch if self.epochs else trainer.current_epoch)
        return self._write(trainer, "completed")

    def on_exception(
        self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException
    ) -> None:
        # A safe stop has recorded itself; anything else ends the segment as a failure.
        if trainer.is_global_zero and not isinstance(exception, TrainingStopped):
            self.segments.failed(exception)
            self._write(trainer, "failed")
