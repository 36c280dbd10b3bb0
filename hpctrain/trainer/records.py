"""The typed records the recorder's parts share and metrics.json is made of (no torch).

Each record knows its JSON form (`to_json`) and, where an earlier segment's metrics.json is read
back, how to take it from there (`from_json`, lenient: a file from an older version still reads).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, ClassVar

UNKNOWN = "unknown"

# A learning rate as metrics.json has it: one number, one entry per optimizer, or "unknown".
LearningRate = float | list[Any] | str


@dataclass
class EpochRecord:
    """One finished epoch: what the module logged, the samples, the time it took."""

    epoch: int
    metrics: dict[str, float | None]
    samples: int | None
    learning_rate: LearningRate
    train_time_s: float
    samples_per_s: float | None
    time_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> EpochRecord:
        return cls(
            epoch=int(raw["epoch"]),
            metrics=dict(raw.get("metrics") or {}),
            samples=raw.get("samples"),
            learning_rate=raw.get("learning_rate", UNKNOWN),
            train_time_s=float(raw.get("train_time_s") or 0.0),
            samples_per_s=raw.get("samples_per_s"),
            time_s=float(raw.get("time_s") or 0.0),
        )


@dataclass(frozen=True)
class Facts:
    """What the run trains with, read once loaders and optimizers are set up."""

    batch_size_per_device: int | str
    accumulate_grad_batches: int
    batches_per_call: int
    data_on_device: bool | None
    cuda_graphs: str | None
    effective_batch_size: int | str
    learning_rate: LearningRate
    learning_rate_text: str
    optimizers: str
    samples_counted_as: str


@dataclass(frozen=True)
class ResumePoint:
    """Where a start of the run continued: the checkpoint and the point it holds."""

    checkpoint: str
    epoch: int
    global_step: int
    mid_epoch: bool

    @classmethod
    def from_json(cls, raw: Any) -> ResumePoint | None:
        try:
            return cls(str(raw["checkpoint"]), int(raw["epoch"]), int(raw["global_step"]),
                       bool(raw["mid_epoch"]))
        except (KeyError, TypeError, ValueError):
            return None


# How a segment of the run ended: one class per `how`.


@dataclass(frozen=True)
class CompletedEnd:
    """A run that trained all its epochs."""

    how: ClassVar[str] = "completed"
    epochs: int


@dataclass(frozen=True)
class FailedEnd:
    """A run that ended with an error."""

    how: ClassVar[str] = "failed"
    error: str


@dataclass(frozen=True)
class UnrecordedEnd:
    """A run that ended without saying how."""

    how: ClassVar[str] = "unrecorded"
    note: str = "ended without a safe stop (killed, out of time, a crash, or a node failure)"


@dataclass(frozen=True)
class StoppedEnd:
    """A safe stop: why, where, and the seconds from the request to the checkpoint on disk."""

    how: ClassVar[str] = "stopped"
    reason: str
    epoch: int
    mid_epoch: bool
    batches_done_in_epoch: int | None
    global_step: int
    requested_at: float | None
    checkpoint_at: float
    signal_to_checkpoint_s: float | None
    decision_s: float | None
    save_s: float
    checkpoint: str


@dataclass(frozen=True)
class OtherEnd:
    """An end this version does not know (a newer writer's): kept as it was written."""

    raw: dict[str, Any]


SegmentEnd = CompletedEnd | FailedEnd | UnrecordedEnd | StoppedEnd | OtherEnd
_ENDS: dict[str, type[CompletedEnd | FailedEnd | UnrecordedEnd | StoppedEnd]] = {
    c.how: c for c in (CompletedEnd, FailedEnd, UnrecordedEnd, StoppedEnd)
}


def end_to_json(end: SegmentEnd | None) -> dict[str, Any] | None:
    """An end as metrics.json has it: {"how": ..., fields...}."""
    if end is None:
        return None
    if isinstance(end, OtherEnd):
        return dict(end.raw)
    return {"how": end.how, **asdict(end)}


def end_from_json(raw: Any) -> SegmentEnd | None:
    """An end read back from metrics.json; one of another shape is kept as it was written."""
    if not isinstance(raw, Mapping):
        return None
    kind = _ENDS.get(str(raw.get("how")))
    if kind is None:
        return OtherEnd(dict(raw))
    names = {f.name for f in fields(kind)}
    required = {f.name for f in fields(kind) if f.default is MISSING}
    keys = set(raw) - {"how"}
    if not required <= keys or keys - names:
        return OtherEnd(dict(raw))
    return kind(**{name: raw[name] for name in keys})


@dataclass
class RestartRecord:
    """One start of the run (a job segment): the job, where it continued, how it ended."""

    start: int
    started_at: float
    slurm_job_id: str | None
    slurm_restart_count: int | None
    resumed_from: ResumePoint | None
    previous_end: SegmentEnd | None
    end: SegmentEnd | None = None
    # The attempt inside the job (--restarts: HPCTRAIN_ATTEMPT; 0 the first, None: no supervisor).
    attempt: int | None = None

    def to_json(self) -> dict[str, Any]:
        # asdict makes the plain fields and resumed_from; an end says how it ended as well.
        return {**asdict(self), "previous_end": end_to_json(self.previous_end),
                "end": end_to_json(self.end)}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> RestartRecord:
        return cls(
            start=int(raw.get("start") or 0),
            started_at=float(raw.get("started_at") or 0.0),
            slurm_job_id=raw.get("slurm_job_id"),
            slurm_restart_count=raw.get("slurm_restart_count"),
            resumed_from=ResumePoint.from_json(raw.get("resumed_from")),
            previous_end=end_from_json(raw.get("previous_end")),
            end=end_from_json(raw.get("end")),
            attempt=raw.get("attempt") if isinstance(raw.get("attempt"), int) else None,
        )


@dataclass
class PartialEpoch:
    """A mid-epoch checkpoint's progress in the epoch, so that its record counts it whole.

    This rank's numbers: every rank trains on an equal share. Saved under the checkpoint's
    "hpctrain.RunRecorder" key as `partial_epoch`, in these plain types.
    """

    epoch: int
    samples: int = 0
    uncounted: int = 0
    train_time_s: float = 0.0
    loss: tuple[float, float] = (0.0, 0.0)  # (sum of loss x samples, samples)
    step_means: dict[str, tuple[float, float]] = field(default_factory=dict)

    def to_state(self) -> dict[str, Any]:
        return {**asdict(self), "loss": list(self.loss)}

    @classmethod
    def from_state(cls, raw: Any) -> PartialEpoch | None:
        if not isinstance(raw, Mapping) or raw.get("epoch") is None:
            return None
        total, weight = raw.get("loss", (0.0, 0.0))
        return cls(
            epoch=int(raw["epoch"]),
            samples=int(raw.get("samples", 0)),
            uncounted=int(raw.get("uncounted", 0)),
            train_time_s=float(raw.get("train_time_s", 0.0)),
            loss=(float(total), float(weight)),
            step_means={k: (float(s), float(w)) for k, (s, w) in
                        (raw.get("step_means") or {}).items()},
        )


@dataclass
class RunHistory:
    """What earlier segments of the run left that this one continues: epochs and starts."""

    epochs: list[EpochRecord] = field(default_factory=list)
    restarts: list[RestartRecord] = field(default_factory=list)
