"""A recorded scaling study read back: its runs refreshed, waited for, their table and plot
(submission/scaling_study.py plans and submits it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpctrain.errors import HpctrainError
from hpctrain.places import together
from hpctrain.studies import scaling_table
from hpctrain.values import rundir

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord, StudyRecord
    from hpctrain.places import Place
    from hpctrain.slurm.client import SlurmClient
    from hpctrain.tracking.watcher import JobWatcher


class Studies:
    """The scaling studies in the history; SLURM is asked only when a study needs it."""

    def __init__(self, history: History, place: Place) -> None:
        self.history = history
        self.place = place
        self._watcher: JobWatcher | None = None

    def slurm(self) -> tuple[SlurmClient, str]:
        """The place's client and its cluster's name."""
        client = self.place.slurm_client()
        return client, self.place.cluster(client, "")

    def watcher(self) -> JobWatcher:
        """The one job watcher for the study's runs."""
        from hpctrain.tracking.watcher import JobWatcher

        if self._watcher is None:
            client, cluster = self.slurm()
            self._watcher = JobWatcher(client, self.history, cluster)
        return self._watcher

    def find(self, name: str | None) -> StudyRecord:
        """The scaling study by name or id (None: the last one; a sweep is not one)."""
        from hpctrain.tracking.selection import find_study

        return find_study(self.history, name, "scale", "scaling study",
                          "hpctrain scale --profile P --topologies 1x1,1x2")

    def records(self, study: StudyRecord) -> dict[str, JobRecord]:
        """The study's submitted runs as the history has them."""
        ids = [str(r["job_id"]) for r in study.runs if r.get("job_id")]
        return {r.job_id: r for r in self.history.by_job_ids(ids)
                if any(r.cluster == run.get("cluster") for run in study.runs)}

    def refresh(self, study: StudyRecord) -> dict[str, JobRecord]:
        """The study's jobs with states fresh from SLURM (one squeue, one sacct)."""
        records = self.records(study)
        if records and not all(r.terminal for r in records.values()):
            fresh, _report = self.watcher().refresh(list(records.values()))
            records = {r.job_id: r for r in fresh}
        return records

    def wait(self, study: StudyRecord, timeout_s: float | None) -> dict[str, JobRecord]:
        """The study's jobs once every one has ended; raise after `timeout_s` seconds."""
        records = self.records(study)
        if not records or all(r.terminal for r in records.values()):
            return records
        fresh, left = self.watcher().wait_until_ended(list(records.values()), timeout_s)
        if left:
            ids = [r.job_id for r in left]
            raise HpctrainError(
                f"runs {', '.join(ids)} of study {study.name} still not ended after "
                f"{timeout_s:g} s",
                f"see them with `hpctrain status {' '.join(ids)}`; the table comes with "
                f"`hpctrain scale-report {study.name}` once they end")
        return {r.job_id: r for r in fresh}

    def report(self, study: StudyRecord, records: dict[str, JobRecord],
               target: scaling_table.Target | None = None) -> tuple[dict[str, Any], list[str]]:
        """The table (written with its plot once every run has ended) and the runs pending;
        time to `target`, else to the study's own --target."""
        target = target or scaling_table.recorded_target(study.runs)
        paths = [Path(str(run["run_dir"]), name) for run in study.runs if run.get("run_dir")
                 for name in (rundir.MONITOR_SUMMARY, rundir.METRICS)]
        with together.reading(self.place, paths) as read:
            rows = scaling_table.table(results(study, records, read), target)
        pending = [r.job_id for r in records.values() if not r.terminal]
        if pending:
            return {"study": study.name, "mode": study.mode, "directory": study.directory,
                    "plot": None, "target": target.label if target else None,
                    "runs": rows}, pending
        return scaling_table.report(study.name, study.mode, rows, Path(study.directory),
                                    target), pending


def results(study: StudyRecord, records: dict[str, JobRecord],
            read: Callable[[Path], bytes | None]) -> list[scaling_table.RunResult]:
    """Each run with its SLURM state, metrics and the monitor's mean GPU utilization (from
    the summary the job writes as it ends), its files read through `read`."""
    out = []
    for run in study.runs:
        rec = records.get(str(run.get("job_id")))
        state = "NOT SUBMITTED" if not run.get("job_id") else rec.state if rec else "UNKNOWN"
        summary = scaling_table.read_json(read, run.get("run_dir"), rundir.MONITOR_SUMMARY)
        metrics = scaling_table.read_json(read, run.get("run_dir"), rundir.METRICS)
        out.append(scaling_table.RunResult(run, state, metrics,
                                           (summary or {}).get("gpu_util_mean_pct")))
    return out
