"""metrics.json across requeues: every start of a run recorded once, every epoch kept once.

Pure functions of the previous metrics.json and the environment (no torch).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from hpctrain.trainer.cluster import slurm_job_id
from hpctrain.trainer.records import (
    EpochRecord,
    RestartRecord,
    ResumePoint,
    RunHistory,
    UnrecordedEnd,
)


def load_metrics(path: Path) -> dict[str, Any]:
    """The metrics.json an earlier segment of the run left, or {} when there is none usable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def kept_epochs(previous: Mapping[str, Any], epochs_finished: int) -> list[EpochRecord]:
    """Earlier epoch records the checkpoint covers, one per epoch; later ones will run again."""
    by_epoch: dict[int, EpochRecord] = {}
    for raw in previous.get("epochs") or []:
        epoch = raw.get("epoch") if isinstance(raw, dict) else None
        if isinstance(epoch, int) and 1 <= epoch <= epochs_finished:
            by_epoch[epoch] = EpochRecord.from_json(raw)
    return [by_epoch[e] for e in sorted(by_epoch)]


def earlier_restarts(previous: Mapping[str, Any]) -> list[RestartRecord]:
    """The earlier starts of the run; one that never recorded its end is marked as such."""
    restarts = [RestartRecord.from_json(r) for r in previous.get("restarts") or []
                if isinstance(r, dict)]
    if restarts and restarts[-1].end is None:
        restarts[-1] = replace(restarts[-1], end=UnrecordedEnd())
    return restarts


def _int_or_none(raw: str | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def start_entry(
    env: Mapping[str, str],
    earlier: list[RestartRecord],
    checkpoint: Path | None,
    header: Mapping[str, Any] | None,
) -> RestartRecord:
    """This start's record: the job, where training continues, how the previous segment ended."""
    resumed = None
    if checkpoint is not None and header is not None:
        resumed = ResumePoint(
            checkpoint=str(checkpoint),
            epoch=header["epochs_finished"] + 1,
            global_step=header["global_step"],
            mid_epoch=header["mid_epoch"],
        )
    return RestartRecord(
        start=len(earlier) + 1,
        started_at=time.time(),
        slurm_job_id=slurm_job_id(env),
        slurm_restart_count=_int_or_none(env.get("SLURM_RESTART_COUNT")),
        resumed_from=resumed,
        previous_end=earlier[-1].end if earlier else None,
        attempt=_int_or_none(env.get("HPCTRAIN_ATTEMPT")),
    )


def run_history(
    metrics_path: Path,
    resume: str,
    checkpoint: Path | None,
    header: Mapping[str, Any] | None,
    env: Mapping[str, str],
) -> RunHistory:
    """The epoch records to keep and the restarts list, this start last, for a new segment."""
    previous = {} if resume == "never" else load_metrics(metrics_path)
    same_run = checkpoint is not None and checkpoint.parent == metrics_path.parent
    epochs = kept_epochs(previous, header["epochs_finished"]) if same_run and header else []
    earlier = earlier_restarts(previous)
    return RunHistory(epochs, [*earlier, start_entry(env, earlier, checkpoint, header)])
