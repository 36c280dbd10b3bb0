"""`hpctrain why JOB`: gather what is known of a job, then diagnose it (hpctrain.diagnosis).

At most two SLURM calls: one `sacct` (every run and step), and for a waiting job one `squeue`
for its start estimate. The logs are read from their end (LOG_TAIL_LINES lines each), at the
place the job ran (this machine or its login), with the run directory's metrics.json,
environment.json, the monitor's summary and (on this machine) the start-up's marks.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpctrain.diagnosis import badnodes
from hpctrain.diagnosis.advice import Advice, advise
from hpctrain.diagnosis.causes import diagnose
from hpctrain.diagnosis.logscan import Finding, scan
from hpctrain.diagnosis.model import Diagnosis, Evidence
from hpctrain.diagnosis.pending import waits_for_nodes
from hpctrain.errors import SlurmError
from hpctrain.slurm import accounting, reservations
from hpctrain.slurm.accounting import Accounting, Row, summary_row
from hpctrain.slurm.jobs import parse_pending, pending_argv
from hpctrain.slurm.runner import AccountingUnavailableError
from hpctrain.slurm.states import JobState, parse_state
from hpctrain.values import rundir
from hpctrain.values.attempts import Attempt, read_attempts
from hpctrain.values.rundir import RunDir

if TYPE_CHECKING:
    from hpctrain.diagnosis.startup import Startup
    from hpctrain.history import History, JobRecord, NodeSuspect
    from hpctrain.places import Place
    from hpctrain.slurm.client import SlurmClient
    from hpctrain.slurm.reservations import Reservation

# A failure's lines are at a log's end; 20,000 lines is hours of a chatty run's output.
LOG_TAIL_LINES = 20_000


@dataclass(frozen=True)
class Why:
    """What `why` says of a job: diagnosis, advice, the logs read, its start-up."""

    job_id: str
    state: str | None
    diagnosis: Diagnosis
    advice: tuple[Advice, ...]
    logs: tuple[str, ...]
    startup: Startup | None = None
    attempts: tuple[Attempt, ...] = ()  # inside the job (--restarts), each with its cause

    def as_dict(self) -> dict[str, object]:
        return {"job_id": self.job_id, "state": self.state, **self.diagnosis.as_dict(),
                "next_time": [a.as_dict() for a in self.advice], "logs_read": list(self.logs),
                "startup": self.startup and self.startup.as_dict(),
                "attempts": [dataclasses.asdict(a) for a in self.attempts]}


def _scan_log(path: str, text: str, whole: bool, lines: int, found: list[Finding],
              read: list[str]) -> None:
    """One log's findings, and the log as `logs_read` names it (its end only, if so)."""
    read.append(path + ("" if whole else f" (last {lines} lines)"))
    found += scan(text, Path(path).name + ("" if whole else f" (its last {lines} lines)"))


def _logs(record: JobRecord, place: Place, lines: int = LOG_TAIL_LINES
          ) -> tuple[list[Finding], list[str]]:
    found: list[Finding] = []
    read: list[str] = []
    for path in _log_paths(record):
        got = place.read_file(Path(path), lines)
        if got is None:
            continue
        data, size = got
        _scan_log(path, data.decode("utf-8", "replace"), len(data) == size, lines, found, read)
    return found, read


def _json(place: Place, path: Path) -> dict[str, Any] | None:
    got = place.read_file(path, None)
    return None if got is None else _json_text(got[0].decode("utf-8", "replace"))


def _user_names(acct: Accounting | None, place: Place) -> dict[int, str]:
    """uid -> name for who cancelled, where SLURM's uids are this machine's users."""
    import pwd

    names: dict[int, str] = {}
    for row in acct.rows if acct and place.uids_known_here else ():
        uid = row.cancelled_by_uid
        if uid is not None and uid not in names:
            try:
                names[uid] = f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
            except KeyError:
                continue
    return names


@dataclass(frozen=True)
class _Gathered:
    """What `why` read: the accounting, a waiting job's reason and start, the logs' findings
    and the run directory's JSON files by name."""

    acct: Accounting
    reason: str | None
    start: str | None
    findings: list[Finding]
    logs: list[str]
    files: dict[str, dict[str, Any] | None]


_RUN_FILES = (rundir.METRICS, rundir.MONITOR_SUMMARY, rundir.ENVIRONMENT, rundir.STALL_REPORT)


def _log_paths(record: JobRecord) -> list[str]:
    return list(dict.fromkeys(p for p in (record.stdout_path, record.stderr_path) if p))


def _gather_here(record: JobRecord, place: Place, client: SlurmClient) -> _Gathered:
    """This machine: one sacct, one squeue for a waiting job, the files read directly."""
    acct = client.accounting(record.job_id)
    last = acct.last
    reason = start = None
    if last is None or last.state is JobState.PENDING:
        reason, start = client.pending_start(record.job_id)
    findings, logs = _logs(record, place)
    run_dir = Path(record.run_dir) if record.run_dir else None
    files = {name: _json(place, run_dir / name) if run_dir else None for name in _RUN_FILES}
    return _Gathered(acct, reason, start, findings, logs, files)


def _gather_batched(record: JobRecord, place: Place) -> _Gathered:
    """Where each ask is a round trip (a login): sacct, squeue, the logs' ends and the run
    directory's files, all asked at once through the place."""
    logs = _log_paths(record)
    files_at = [Path(record.run_dir) / n for n in _RUN_FILES] if record.run_dir else []
    answers, got = place.ask_and_read(
        [accounting.argv(record.job_id), pending_argv(record.job_id)],
        [*((Path(p), LOG_TAIL_LINES) for p in logs), *((f, None) for f in files_at)])
    out, err, code = answers[0]
    if code != 0:
        raise AccountingUnavailableError(f"sacct failed on the login: {(err or out).strip()}",
                                         "job accounting (slurmdbd) is off or down there")
    reason, start = parse_pending(answers[1][0])
    findings: list[Finding] = []
    read: list[str] = []
    for path, tail in zip(logs, got[:len(logs)], strict=True):
        if tail is not None:
            data, size = tail
            _scan_log(path, data.decode("utf-8", "replace"), len(data) == size,
                      LOG_TAIL_LINES, findings, read)
    files = {f.name: None if g is None else _json_text(g[0].decode("utf-8", "replace"))
             for f, g in zip(files_at, got[len(logs):], strict=True)}
    return _Gathered(accounting.parse_accounting(out), reason, start, findings, read,
                     {n: files.get(n) for n in _RUN_FILES})


def _json_text(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _stall_stacks(record: JobRecord, place: Place, stall: dict[str, Any] | None
                  ) -> dict[str, str]:
    """The stacks the stall watcher kept, by file name (one more read, only after a stall)."""
    names = sorted({str(row["stack"]) for view in (stall or {}).get("nodes") or []
                    if isinstance(view, dict) for row in view.get("ranks") or []
                    if isinstance(row, dict) and row.get("stack")})
    if not names or not record.run_dir:
        return {}
    folder = RunDir(record.run_dir).stall_dir
    _, got = place.ask_and_read([], [(folder / n, LOG_TAIL_LINES) for n in names])
    return {n: g[0].decode("utf-8", "replace") for n, g in zip(names, got, strict=True) if g}


def _maintenance(reason: str | None, client: SlurmClient) -> tuple[Reservation, ...]:
    """The maintenance reservations, asked only of a job SLURM keeps waiting for nodes."""
    if not waits_for_nodes(reason):
        return ()
    try:
        return tuple(reservations.maintenance(client.reservations()))
    except SlurmError:
        return ()  # the reason alone is still said


def why(record: JobRecord, place: Place) -> Why:
    """The diagnosis of `record`'s job and what to ask for next time."""
    client = place.slurm_client()
    got = (_gather_batched(record, place) if client.transport.batches
           else _gather_here(record, place, client))
    stall = got.files[rundir.STALL_REPORT]
    last = got.acct.last
    waiting = last is None or last.state is JobState.PENDING
    reason = (got.reason or (last.reason if last else None)) if waiting else None
    evidence = Evidence(
        job_id=record.job_id, accounting=got.acct, findings=tuple(got.findings),
        pending_reason=reason, maintenance=_maintenance(reason, client),
        time_limit_s=record.time_limit_s,
        start_estimate=got.start, metrics=got.files[rundir.METRICS],
        monitor=got.files[rundir.MONITOR_SUMMARY], environment=got.files[rundir.ENVIRONMENT],
        chain=record.segments or 1, user_names=_user_names(got.acct, place), stall=stall,
        stall_stacks=_stall_stacks(record, place, stall))
    return Why(record.job_id, last.slurm_state if last else None, diagnose(evidence),
               tuple(advise(got.acct, got.files[rundir.MONITOR_SUMMARY])), tuple(got.logs),
               *_startup_and_attempts(record, place))


def _startup_and_attempts(record: JobRecord, place: Place
                          ) -> tuple[Startup | None, tuple[Attempt, ...]]:
    """The job's start-up timeline and its attempts inside its allocation, each with what ended
    it (`--restarts`): the marks are a file a rank, so over a login both come in one copy."""
    if not record.run_dir:
        return None, ()
    from hpctrain.diagnosis.startup import read

    names = (rundir.STARTUP_DIR, rundir.ATTEMPTS)
    with place.readable(Path(record.run_dir), names) as readable:
        return (read(readable, record.job_id),
                tuple(read_attempts(RunDir(readable).attempts, record.job_id)))


# `status` reads less: a verdict of a few words for each newly ended job.
VERDICT_TAIL_LINES = 2_000


def verdicts(history: History, records: Sequence[JobRecord], local: Place) -> list[JobRecord]:
    """`records`, each ended job with its verdict, made now where missing and stored. A job is
    judged on its logs too where reading them costs no round trip; else from its state (`why`
    reads at the place)."""
    from hpctrain import places

    made: dict[int, str] = {}
    new = [r for r in records if r.unjudged]
    for place, group in places.by_place(new, local) if new else ():
        stalls = _stall_reports(group, place)
        judged = [(r, *_verdict(r, place, stalls.get(r.id))) for r in group]
        made.update((r.id, d.headline) for r, d, _ in judged)
        history.add_suspects(_suspects(judged, place))
        _adopt_retries(history, judged, place)
    history.set_verdicts(made.items())
    return [dataclasses.replace(r, verdict=made[r.id]) if r.id in made else r for r in records]


def _suspects(judged: Sequence[tuple[JobRecord, Diagnosis, Evidence]], place: Place
              ) -> list[NodeSuspect]:
    """The nodes these jobs' failures point at; SLURM's node states asked once, if needed."""
    states: dict[str, str] = {}
    if any(badnodes.needs_node_states(d, ev) for _, d, ev in judged):
        try:
            states = place.slurm_client().node_states()
        except SlurmError:
            states = {}  # the verdict stands; which node failed stays unknown
    return [s for r, d, ev in judged for s in badnodes.suspects(d, ev, r.cluster, states)]


def _adopt_retries(history: History, judged: Sequence[tuple[JobRecord, Diagnosis, Evidence]],
                   place: Place) -> None:
    """The jobs a stall watcher submitted again (--retries) join the history as the next
    attempts of the job that stalled."""
    for r, d, ev in judged:
        if d.cause != "stalled" or (ev.stall or {}).get("action") != "retry" or not r.run_dir:
            continue
        got = place.read_file(RunDir(r.run_dir).retries, None)
        for line in (got[0].decode("utf-8", "replace") if got else "").splitlines():
            new, old = (line.split() + ["", ""])[:2]
            if old == r.job_id and new.isdigit() and not history.by_job_ids([new]):
                history.add_attempt(r, new, _renamed(r.stdout_path, r.job_id, new),
                                    _renamed(r.stderr_path, r.job_id, new))


def _renamed(path: str | None, old: str, new: str) -> str | None:
    """A log's path for the retry: the job id in its name (SLURM's %j) is the new one."""
    if path is None:
        return None
    p = Path(path)
    return str(p.with_name(p.name.replace(old, new)))


def _stall_reports(group: Sequence[JobRecord], place: Place) -> dict[int, dict[str, Any]]:
    """Each ended job's stall report, if the stall watch wrote one: read together (over a
    login one round trip for the group, once per job, when status first sees it ended), and
    only for the ends a stall leaves (cancelled; timed out with --on-stall report)."""
    ended = [r for r in group if r.run_dir
             and parse_state(r.state) in (JobState.CANCELLED, JobState.TIMEOUT)]
    if not ended:
        return {}
    _, got = place.ask_and_read([], [(RunDir(str(r.run_dir)).stall_report, None)
                                     for r in ended])
    reports = {r.id: _json_text(g[0].decode("utf-8", "replace")) for r, g in
               zip(ended, got, strict=True) if g is not None}
    return {k: v for k, v in reports.items() if v is not None}


def _runs(record: JobRecord, place: Place, metrics: dict[str, Any] | None, row: Row
          ) -> Accounting:
    """The job's runs: its last state alone, or, for a run that started more than once here
    (SLURM requeued it: a node failed, a preemption), each run as sacct keeps it, so that a
    node failure before the requeue still names its node."""
    if not metrics or len(metrics.get("restarts") or []) < 2:
        return Accounting((row,))
    try:
        got = place.slurm_client().accounting(record.job_id)
    except SlurmError:
        return Accounting((row,))
    return got if got.runs else Accounting((row,))


def _verdict(record: JobRecord, place: Place, stall: dict[str, Any] | None
             ) -> tuple[Diagnosis, Evidence]:
    row = summary_row(record.job_id, parse_state(record.state),
                      record.slurm_state or record.state, exit_code=record.exit_code,
                      signal=record.signal, elapsed_s=record.elapsed_s,
                      time_limit_s=record.time_limit_s, node_list=record.node_list)
    findings: list[Finding] = []
    metrics = None
    if place.free_reads:
        findings = _logs(record, place, VERDICT_TAIL_LINES)[0]
        if record.run_dir:
            metrics = _json(place, RunDir(record.run_dir).metrics)
    acct = _runs(record, place, metrics, row)
    evidence = Evidence(job_id=record.job_id, accounting=acct, findings=tuple(findings),
                        metrics=metrics, stall=stall, user_names=_user_names(acct, place),
                        stall_stacks=_stall_stacks(record, place, stall))
    return diagnose(evidence), evidence
