"""metrics.json across requeues: every start of a run recorded once, every epoch kept once.

Pure functions of the previous metrics.json and the environment (no torch).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpctrain.trainer.cluster import slurm_job_id

UNRECORDED_END = {
    "how": "unrecorded",
    "note": "ended without a safe stop (killed, out of time, a crash, or a node failure)",
}


def load_metrics(path: Path) -> dict[str, Any]:
    """The metrics.json an earlier segment of the run left, or {} when there is none usable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def kept_epochs(previous: Mapping[str, Any], epochs_finished: int) -> list[dict[str, Any]]:
    """Earlier epoch records the checkpoint covers, one per epoch; later ones will run again."""
    by_epoch: dict[int, dict[str, Any]] = {}
    for record in previous.get("epochs") or []:
        epoch = record.get("epoch") if isinstance(record, dict) else None
        if isinstance(epoch, int) and 1 <= epoch <= epochs_finished:
            by_epoch[epoch] = record
    return [by_epoch[e] for e in sorted(by_epoch)]


def earlier_restarts(previous: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The earlier starts of the run; one that never recorded its end is marked as such."""
    restarts = [dict(r) for r in previous.get("restarts") or [] if isinstance(r, dict)]
    if restarts and restarts[-1].get("end") is None:
        restarts[-1]["end"] = dict(UNRECORDED_END)
    return restarts


def _int_or_none(raw: str | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def start_entry(
    env: Mapping[str, str],
    earlier: list[dict[str, Any]],
    checkpoint: Path | None,
    header: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """This start's record: the job, where training continues, how the previous segment ended."""
    resumed = None
    if checkpoint is not None and header is not None:
        resumed = {
            "checkpoint": str(checkpoint),
            "epoch": header["epochs_finished"] + 1,
            "global_step": header["global_step"],
            "mid_epoch": header["mid_epoch"],
        }
    return {
        "start": len(earlier) + 1,
        "started_at": time.time(),
        "slurm_job_id": slurm_job_id(env),
        "slurm_restart_count": _int_or_none(env.get("SLURM_RESTART_COUNT")),
        "resumed_from": resumed,
        "previous_end": earlier[-1]["end"] if earlier else None,
        "end": None,
    }


def run_history(
    metrics_path: Path,
    resume: str,
    checkpoint: Path | None,
    header: Mapping[str, Any] | None,
    env: Mapping[str, str],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The epoch records to keep and the restarts list, this start last, for a new segment."""
    previous = {} if resume == "never" else load_metrics(metrics_path)
    same_run = checkpoint is not None and checkpoint.parent == metrics_path.parent
    epochs = kept_epochs(previous, header["epochs_finished"]) if same_run and header else []
    earlier = earlier_restarts(previous)
    return epochs, [*earlier, start_entry(env, earlier, checkpoint, header)]
