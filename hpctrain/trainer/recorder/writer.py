"""Assembles metrics.json from the recorder's records and writes it atomically (rank 0)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L

from hpctrain import __version__
from hpctrain.trainer.callbacks import atomic_write_text
from hpctrain.trainer.recorder.best_checkpoint import BestRecord
from hpctrain.trainer.recorder.metrics_file import (
    MetricsFile,
    Status,
    latest_metrics,
    overall_samples_per_s,
)
from hpctrain.trainer.records import EpochRecord, Facts, RestartRecord
from hpctrain.trainer.startup import StartupRecord
from hpctrain.values.rundir import RunDir


@dataclass(frozen=True)
class RunIdentity:
    """What stays the same for this start of the run."""

    task: str
    run_dir: Path
    launch: str
    slurm_job_id: str | None
    resumed_from: Path | None = None
    # The resolved trainer config as it runs (after trainer.global_batch was split).
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunState:
    """The parts' records at the moment of a write."""

    status: Status
    epochs: list[EpochRecord]
    restarts: list[RestartRecord]
    facts: Facts | None
    startup: StartupRecord
    best: BestRecord
    first_epoch: int | None


class MetricsWriter:
    """One writer for metrics.json: the run's identity and layout, then the parts' records."""

    def __init__(self, identity: RunIdentity) -> None:
        self.identity = identity
        self.fit_start = time.perf_counter()
        self.latest: MetricsFile | None = None

    def build(self, trainer: L.Trainer, state: RunState) -> MetricsFile:
        ident, epochs, best = self.identity, state.epochs, state.best
        latest = latest_metrics(epochs)
        metrics = MetricsFile(
            hpctrain_version=__version__,
            task=ident.task,
            status=state.status,
            world_size=trainer.world_size,
            num_nodes=trainer.num_nodes,
            devices_per_node=trainer.num_devices,
            accelerator="gpu" if trainer.strategy.root_device.type == "cuda" else "cpu",
            epochs_completed=epochs[-1].epoch if epochs else 0,
            max_epochs=trainer.max_epochs,
            first_epoch=state.first_epoch,
            resumed_from=str(ident.resumed_from) if ident.resumed_from else None,
            launch=ident.launch,
            slurm_job_id=ident.slurm_job_id,
            run_dir=str(ident.run_dir),
            wall_time_s=time.perf_counter() - self.fit_start,
            epoch_times_s=[e.time_s for e in epochs],
            samples_per_s=overall_samples_per_s(epochs),
            epoch_samples_per_s=[e.samples_per_s for e in epochs],
            logged_metrics=list(latest),
            final=latest,
            best_val_metric=best.metric,
            best_val_mode=best.mode,
            best_val_score=best.score,
            best_epoch=best.epoch,
            best_note=best.note,
            epochs=list(epochs),
            restarts=list(state.restarts),
            settings=ident.settings,
        )
        return metrics.with_facts(state.facts).with_startup(state.startup)

    def write(self, trainer: L.Trainer, state: RunState) -> MetricsFile:
        self.latest = self.build(trainer, state)
        atomic_write_text(RunDir(self.identity.run_dir).metrics, self.latest.dumps())
        return self.latest
