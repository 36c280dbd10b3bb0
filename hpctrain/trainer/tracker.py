"""The tracker run: one id for every start of a run directory, and its files kept one run.

Every start of a run (an in-job restart, a requeue, a chain's next segment, a sweep point's
requeue, a `--retries` attempt) runs in the same run directory; its `tracker-run.json` gives
the trackers that resume by id (W&B, Comet, MLflow) the same run each time. Rank 0 writes it:
Lightning's loggers create their runs on rank 0 only, so the other ranks' ids are never used.
Pure functions of files and the environment (no torch, no Lightning).
"""

from __future__ import annotations

import csv
import json
import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpctrain.files.atomic import write_atomic

# W&B takes up to 64 characters of [a-z0-9]; Comet's experiment keys are 32 to 50
# alphanumerics: 32 hex digits are both.
_ID_LENGTH = 32


def new_run_id() -> str:
    """A fresh tracker run id that W&B and Comet both accept."""
    return uuid.uuid4().hex


def valid_run_id(value: object) -> bool:
    """Whether `value` is an id this module made (a hand-edited file gets a new one)."""
    return (isinstance(value, str) and len(value) == _ID_LENGTH
            and all(c in "0123456789abcdef" for c in value))


def read_tracker_run(path: Path) -> dict[str, Any]:
    """The run's tracker file, or {} when there is none usable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _this_start(env: Mapping[str, str], resumed_at_step: int | None) -> dict[str, Any]:
    return {
        "at": time.time(),
        "slurm_job_id": env.get("SLURM_JOB_ID"),
        "slurm_restart_count": env.get("SLURM_RESTART_COUNT"),
        "attempt": env.get("HPCTRAIN_ATTEMPT"),
        "resumed_at_step": resumed_at_step,
    }


def begin_start(
    data: Mapping[str, Any], env: Mapping[str, str], resumed_at_step: int | None
) -> dict[str, Any]:
    """The tracker file after this start: its id kept (made at the first start), this start
    added; what else the file holds (a rerun's origin, MLflow's run id) is kept."""
    out = dict(data)
    if not valid_run_id(out.get("id")):
        out["id"] = new_run_id()
        out["created_at"] = time.time()
    starts = out.get("starts")
    out["starts"] = [*(starts if isinstance(starts, list) else []),
                     _this_start(env, resumed_at_step)]
    return out


def write_tracker_run(path: Path, data: Mapping[str, Any]) -> None:
    """Write the tracker file whole (a killed write leaves the previous one)."""
    write_atomic(path, json.dumps(data, indent=2) + "\n")


def start_tracker_run(
    path: Path, rank_zero: bool, resumed_at_step: int | None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """This start's tracker file: rank 0 makes or continues it; the other ranks only read."""
    data = read_tracker_run(path)
    if not rank_zero:
        return data
    data = begin_start(data, os.environ if env is None else env, resumed_at_step)
    write_tracker_run(path, data)
    return data


def trim_csv(path: Path, first_retrained_step: int) -> int:
    """Drop the rows of metrics.csv from `first_retrained_step` on; how many went.

    Those steps are trained again after a resume and logged again: a step once, steps growing.
    """
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except OSError:
        return 0
    if not rows or "step" not in rows[0]:
        return 0
    at = rows[0].index("step")
    kept = [rows[0], *(r for r in rows[1:] if not _step_from(r, at, first_retrained_step))]
    dropped = len(rows) - len(kept)
    if dropped:
        import io

        out = io.StringIO()
        csv.writer(out).writerows(kept)  # Lightning's dialect: excel, \r\n
        write_atomic(path, out.getvalue())
    return dropped


def _step_from(row: list[str], at: int, first: int) -> bool:
    try:
        return int(float(row[at])) >= first
    except (IndexError, ValueError):
        return False
