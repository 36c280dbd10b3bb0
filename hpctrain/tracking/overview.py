"""What `status JOB` and `stats` show of a job beyond SLURM's answer: its monitor's summary, its
start-up timeline and the attempts inside it, read from its run directory wherever that is (on
this disk, or on the login it was submitted through: one round trip for all of them)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpctrain.values.rundir import MONITOR_DIR, OVERVIEW, OVERVIEW_ENDED, RunDir

if TYPE_CHECKING:
    from hpctrain.diagnosis.startup import Startup
    from hpctrain.history import JobRecord
    from hpctrain.places import Place


@dataclass(frozen=True)
class Overview:
    """One job's run directory, summed up."""

    # The monitor's summary (hpctrain.monitor.stats.job_summary); None: no samples there.
    monitor: dict[str, Any] | None
    startup: Startup | None
    # The attempts of this job id inside its allocation (`--restarts`), as dicts of Attempt.
    attempts: list[dict[str, Any]]
    # The job has ended (a start-up without a rank's marks is then a program that marks none).
    ended: bool = False


def read(run_dir: Path, job_id: str | None, shown_as: str | None = None,
         ended: bool = False) -> Overview:
    """The overview of a run directory on this disk (`shown_as`: the run directory's own path,
    where `run_dir` is a copy of its files; `ended`: the job has, so its monitor's summary,
    written as it ended, stands for its samples where it is there)."""
    from hpctrain.diagnosis import startup
    from hpctrain.values.attempts import read_attempts

    attempts = read_attempts(RunDir(run_dir).attempts, job_id)
    return Overview(_monitor(run_dir, ended, shown_as), startup.read(run_dir, job_id),
                    [dataclasses.asdict(a) for a in attempts], ended)


def _monitor(run_dir: Path, ended: bool, shown_as: str | None) -> dict[str, Any] | None:
    summary = _summary(run_dir, ended)
    if summary is not None:
        summary["run_dir"] = shown_as or str(run_dir)
    return summary


def _summary(run_dir: Path, ended: bool) -> dict[str, Any] | None:
    from hpctrain.monitor.stats import job_summary

    if ended:
        try:
            written = json.loads(RunDir(run_dir).monitor_summary.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            written = None
        if isinstance(written, dict) and isinstance(written.get("nodes"), list):
            written.pop("ranks", None)  # which node each rank ran on: why's, not the overview's
            return written
    return job_summary(run_dir)


def of_record(record: JobRecord, place: Place) -> Overview | None:
    """The overview of a tracked job's run directory at its place (None: it has none)."""
    if not record.run_dir:
        return None
    run_dir, ended = Path(record.run_dir), record.terminal
    with place.readable(run_dir, OVERVIEW_ENDED if ended else OVERVIEW) as readable:
        got = read(readable, record.job_id, record.run_dir, ended)
    if got.monitor is None and ended:
        # No summary (a node died before the job's end wrote it): the samples, read again.
        with place.readable(run_dir, (MONITOR_DIR,)) as readable:
            got = dataclasses.replace(got, monitor=_monitor(readable, False, record.run_dir))
    return got
