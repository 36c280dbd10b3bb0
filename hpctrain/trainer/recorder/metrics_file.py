"""metrics.json: one typed model, versioned, documented in docs/trainer.md (no torch).

SCHEMA_VERSION changes when a key is removed or renamed, or its type or meaning changes; a new
key does not change it (readers ignore keys they do not know). Files without `schema_version`
were written before it existed and have version 1's keys, less `schema_version` and `settings`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from hpctrain.trainer.records import (
    EpochRecord,
    Facts,
    LearningRate,
    RestartRecord,
)
from hpctrain.trainer.startup import StartupRecord

SCHEMA_VERSION = 1

Status = Literal["running", "completed", "stopped", "failed"]

# The field that holds the latest value of every logged metric; written as one key per metric.
FINAL = "final"
FINAL_PREFIX = "final_"


@dataclass(kw_only=True)
class MetricsFile:
    """Everything metrics.json holds, in the order it is written."""

    schema_version: int = SCHEMA_VERSION
    hpctrain_version: str
    task: str
    status: Status
    world_size: int
    num_nodes: int
    devices_per_node: int
    accelerator: Literal["gpu", "cpu"]
    epochs_completed: int
    max_epochs: int | None
    first_epoch: int | None
    resumed_from: str | None
    launch: str
    slurm_job_id: str | None
    run_dir: str
    # The facts (records.Facts but its banner text): null until training started.
    batch_size_per_device: int | str | None = None
    accumulate_grad_batches: int | None = None
    batches_per_call: int | None = None
    data_on_device: bool | None = None
    cuda_graphs: str | None = None
    effective_batch_size: int | str | None = None
    learning_rate: LearningRate | None = None
    optimizers: str | None = None
    samples_counted_as: str | None = None
    wall_time_s: float
    startup_s: float | None = None
    startup_from: str | None = None
    startup_imports_s: float | None = None
    epoch_times_s: list[float] = field(default_factory=list)
    samples_per_s: float | None = None
    epoch_samples_per_s: list[float | None] = field(default_factory=list)
    logged_metrics: list[str] = field(default_factory=list)
    final: dict[str, float | None] = field(default_factory=dict)
    best_val_metric: str | None = None
    best_val_mode: str | None = None
    best_val_score: float | None = None
    best_epoch: int | None = None
    best_note: str | None = None
    epochs: list[EpochRecord] = field(default_factory=list)
    restarts: list[RestartRecord] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    def with_facts(self, facts: Facts | None) -> MetricsFile:
        """This file with the run's facts filled in (the banner's text left out)."""
        if facts is not None:
            for name, value in asdict(facts).items():
                if name != "learning_rate_text":
                    setattr(self, name, value)
        return self

    def with_startup(self, startup: StartupRecord) -> MetricsFile:
        """This file with the start-up times filled in."""
        for name, value in asdict(startup).items():
            setattr(self, name, value)
        return self

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == FINAL:
                out.update((FINAL_PREFIX + name, v) for name, v in value.items())
            elif f.name in ("epochs", "restarts"):
                out[f.name] = [record.to_json() for record in value]
            else:
                out[f.name] = value
        return out

    def dumps(self) -> str:
        """The file's text."""
        return json.dumps(self.to_json(), indent=2) + "\n"


def documented_keys() -> list[str]:
    """The top-level keys as docs/trainer.md names them: `final_<name>` for the latest values."""
    return [f"{FINAL_PREFIX}<name>" if f.name == FINAL else f.name for f in fields(MetricsFile)]


def latest_metrics(epochs: list[EpochRecord]) -> dict[str, float | None]:
    """Every metric's value in the latest epoch that logged it, in first-logged order."""
    latest: dict[str, float | None] = {}
    for record in epochs:
        latest.update(record.metrics)
    return latest


def overall_samples_per_s(epochs: list[EpochRecord]) -> float | None:
    """Global training samples per second over these epochs (None if a batch went uncounted)."""
    counted = [e.samples for e in epochs]
    train_time = sum(e.train_time_s for e in epochs)
    if None in counted:
        return None
    samples = sum(c for c in counted if c is not None)
    return samples / train_time if samples and train_time > 0 else None
