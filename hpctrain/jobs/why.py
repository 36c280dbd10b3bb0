"""`hpctrain why JOB`: gather what is known of a job, then diagnose it (hpctrain.diagnosis).

At most two SLURM calls: one `sacct` (every run and step), and for a waiting job one `squeue`
for its start estimate. The logs are read from their end (LOG_TAIL_LINES lines each), at the
place the job ran (this machine or its login), with the run directory's metrics.json,
environment.json and the monitor's summary.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpctrain import rundir
from hpctrain.diagnosis.advice import Advice, advise
from hpctrain.diagnosis.causes import diagnose
from hpctrain.diagnosis.logscan import Finding, scan
from hpctrain.diagnosis.model import Diagnosis, Evidence
from hpctrain.slurm.accounting import Accounting, summary_row
from hpctrain.slurm.states import JobState, parse_state

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord
    from hpctrain.places import Place

# A failure's lines are at a log's end; 20,000 lines is hours of a chatty run's output.
LOG_TAIL_LINES = 20_000


@dataclass(frozen=True)
class Why:
    job_id: str
    state: str | None
    diagnosis: Diagnosis
    advice: tuple[Advice, ...]
    logs: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {"job_id": self.job_id, "state": self.state, **self.diagnosis.as_dict(),
                "next_time": [a.as_dict() for a in self.advice], "logs_read": list(self.logs)}


def _logs(record: JobRecord, place: Place, lines: int = LOG_TAIL_LINES
          ) -> tuple[list[Finding], list[str]]:
    found: list[Finding] = []
    read: list[str] = []
    for path in dict.fromkeys(p for p in (record.stdout_path, record.stderr_path) if p):
        got = place.read_file(Path(path), lines)
        if got is None:
            continue
        data, size = got
        whole = len(data) == size
        name = Path(path).name + ("" if whole else f" (its last {lines} lines)")
        read.append(path + ("" if whole else f" (last {lines} lines)"))
        found += scan(data.decode("utf-8", "replace"), name)
    return found, read


def _json(place: Place, path: Path) -> dict[str, Any] | None:
    got = place.read_file(path, None)
    if got is None:
        return None
    try:
        value = json.loads(got[0])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _user_names(acct: Accounting | None, place: Place) -> dict[int, str]:
    """uid -> name for who cancelled, where the job ran on this machine's users."""
    import pwd

    names: dict[int, str] = {}
    for row in acct.rows if acct and place.login is None else ():
        uid = row.cancelled_by_uid
        if uid is not None and uid not in names:
            try:
                names[uid] = f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
            except KeyError:
                continue
    return names


def why(record: JobRecord, place: Place) -> Why:
    """The diagnosis of `record`'s job and what to ask for next time."""
    client = place.slurm_client()
    acct = client.accounting(record.job_id)
    last = acct.last
    reason = start = None
    if last is None or last.state is JobState.PENDING:
        reason, start = client.pending_start(record.job_id)
        reason = reason or (last.reason if last else None)
    findings, logs = _logs(record, place)
    run_dir = Path(record.run_dir) if record.run_dir else None
    files = {name: _json(place, run_dir / name) if run_dir else None
             for name in (rundir.METRICS, rundir.MONITOR_SUMMARY, rundir.ENVIRONMENT)}
    evidence = Evidence(
        job_id=record.job_id, accounting=acct, findings=tuple(findings),
        pending_reason=reason if (last is None or last.state is JobState.PENDING) else None,
        start_estimate=start, metrics=files[rundir.METRICS],
        monitor=files[rundir.MONITOR_SUMMARY], environment=files[rundir.ENVIRONMENT],
        chain=record.segments or 1, user_names=_user_names(acct, place))
    return Why(record.job_id, last.slurm_state if last else None, diagnose(evidence),
               tuple(advise(acct, files[rundir.MONITOR_SUMMARY])), tuple(logs))


# `status` reads less: a verdict of a few words for each newly ended job.
VERDICT_TAIL_LINES = 2_000


def verdicts(history: History, records: Sequence[JobRecord], local: Place) -> list[JobRecord]:
    """`records`, each ended job with its verdict, made now where missing and stored. A job
    submitted here is judged on its logs too; a login's from its state (`why` reads there)."""
    made: dict[int, str] = {}
    for r in records:
        if r.terminal and r.verdict is None:
            made[r.id] = _verdict(r, local)
    history.set_verdicts(made.items())
    return [dataclasses.replace(r, verdict=made[r.id]) if r.id in made else r for r in records]


def _verdict(record: JobRecord, local: Place) -> str:
    row = summary_row(record.job_id, parse_state(record.state),
                      record.slurm_state or record.state, exit_code=record.exit_code,
                      signal=record.signal, elapsed_s=record.elapsed_s,
                      time_limit_s=record.time_limit_s, node_list=record.node_list)
    findings: list[Finding] = []
    metrics = None
    if record.login is None:
        findings = _logs(record, local, VERDICT_TAIL_LINES)[0]
        if record.run_dir:
            metrics = _json(local, Path(record.run_dir) / rundir.METRICS)
    evidence = Evidence(job_id=record.job_id, accounting=Accounting((row,)),
                        findings=tuple(findings), metrics=metrics)
    return diagnose(evidence).headline
