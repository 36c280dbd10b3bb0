"""The one job watcher: what SLURM says about tracked jobs, stored in the history.

`status` refreshes many jobs at once, `logs -f` polls one job with back-off, `scale --wait`
refreshes a study's runs with back-off until they end, `cancel` skips the jobs known to have
ended; every one of them asks through JobWatcher.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from hpctrain.errors import SlurmError, SlurmUnavailableError
from hpctrain.history import History, JobRecord, StateUpdate
from hpctrain.slurm.client import SlurmClient
from hpctrain.slurm.parsers import JobInfo, array_of
from hpctrain.slurm.query import needs_accounting
from hpctrain.slurm.runner import AccountingUnavailableError, SlurmTimeoutError
from hpctrain.slurm.states import parse_state
from hpctrain.tracking.merge import kept, merge
from hpctrain.tracking.report import RefreshReport

# Without accounting, exit codes of finished jobs come from `scontrol show job`, one call per
# job; each job is asked once (it is terminal afterwards), and at most this many per refresh.
MAX_SCONTROL_PER_REFRESH = 3
# Polling one job: SLURM is asked at most once per interval. The interval grows while nothing
# changes (a long job need not cost a call every few seconds) and starts again at a change;
# the cap keeps `logs -f` from lingering long after the job has ended.
POLL_INTERVAL_S = 5.0
POLL_BACKOFF_FACTOR = 1.5
MAX_POLL_INTERVAL_S = 15.0
# slurmdbd hears of a job's end a little after the controller: polls of sacct that lag behind
# before the watcher stops asking, and fewer for a job sacct has never heard of.
MAX_LAGGING_POLLS = 6
MAX_UNHEARD_POLLS = 2


class Source(Enum):
    """The SLURM command the watcher asks next about a job."""

    SQUEUE = "squeue"
    SACCT = "sacct"
    SCONTROL = "scontrol"


@dataclass
class CancelReport:
    """The jobs one cancel sent to scancel, and those it skipped with the reason."""

    cancelled: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "cancelled": self.cancelled,
            "skipped": [{"job_id": j, "reason": r} for j, r in self.skipped.items()],
        }


@dataclass(frozen=True)
class Poll:
    """One poll of one job: the job as stored now, and when to ask again."""

    record: JobRecord
    changed: bool
    # Nothing more to learn: the job has ended, or nobody knows it any more.
    done: bool
    wait_s: float
    # SLURM did not answer: the record is as last seen, and it is asked again after wait_s.
    error: SlurmUnavailableError | None = None


@dataclass
class _Track:
    """What the watcher remembers about one job between two questions."""

    source: Source | None = Source.SQUEUE
    live: JobInfo | None = None
    lagging: int = 0
    interval_s: float = POLL_INTERVAL_S


def _after_sacct(record: JobRecord, acct: JobInfo | None, track: _Track) -> Source | None:
    """Where to ask next once sacct has answered (None: nothing more to learn)."""
    if acct is not None and acct.state.is_terminal:
        return None
    seen = parse_state(record.state)
    if acct is None and track.live is not None and not track.live.state.is_terminal:
        # COMPLETING, not yet in slurmdbd: the controller still holds it, so ask it again.
        return Source.SQUEUE
    if acct is not None and acct.state is not seen and not seen.is_terminal:
        # Requeued, or slurmdbd saw it before the controller's purge: back to squeue.
        return Source.SQUEUE
    track.lagging += 1
    patience = MAX_LAGGING_POLLS if acct is not None else MAX_UNHEARD_POLLS
    return None if track.lagging >= patience else Source.SACCT


def _backed_off(interval_s: float) -> float:
    return min(interval_s * POLL_BACKOFF_FACTOR, MAX_POLL_INTERVAL_S)


def _shown(record: JobRecord) -> tuple[object, ...]:
    """What a person sees of a job's state: a change here resets the back-off."""
    return (record.state, record.reason, record.exit_code, record.stale, record.terminal)


class JobWatcher:
    """Asks SLURM about the tracked jobs of one cluster and stores the answers.

    One squeue for all ids, then at most one sacct for the jobs squeue no longer shows (or
    shows ended without an exit code), then, without accounting, a bounded few scontrol.
    Finished jobs are never asked about again.
    """

    def __init__(self, client: SlurmClient, history: History, cluster: str) -> None:
        self.client = client
        self.history = history
        self.cluster = cluster
        self._final: dict[int, JobRecord] = {}
        self._tracks: dict[int, _Track] = {}

    def is_final(self, record: JobRecord) -> bool:
        """True when the job has ended as far as the history or this watcher knows."""
        return record.terminal or record.id in self._final

    def latest(self, record: JobRecord) -> JobRecord:
        """The freshest row this watcher holds for the job (the cached final one if ended)."""
        return self._final.get(record.id, record)

    # --- many jobs at once (status) ----------------------------------------------------------

    def refresh(self, records: Sequence[JobRecord]) -> tuple[list[JobRecord], RefreshReport]:
        """Ask SLURM about the unfinished jobs of this cluster among `records`; store them.

        At most two calls whatever the count while accounting works (`report.calls`; the
        queue query's answer is `report.query`). When SLURM cannot be asked the unfinished jobs
        come back as last seen, marked stale, with `report.error`.
        """
        report = RefreshReport()
        try:
            ask = self._to_ask(records, report)
            report.asked = len(ask)
            fresh = self._store(self._ask_all(ask, report)) if ask else {}
        except SlurmUnavailableError as e:
            # Nothing is stored: a failed squeue says nothing about the jobs (they may well
            # still run), and the history keeps what SLURM said last.
            report.error = e
            fresh = {r.id: replace(r, stale=True) for r in records if not self.is_final(r)}
        return [fresh.get(r.id) or self.latest(r) for r in records], report

    def require_cluster(self) -> None:
        """Raise when the cluster is unknown: every job would look like another cluster's."""
        if not self.cluster:
            raise self.client.unknown_cluster_error()

    def _to_ask(self, records: Sequence[JobRecord], report: RefreshReport) -> list[JobRecord]:
        unfinished = [r for r in records if not self.is_final(r)]
        if unfinished:
            self.require_cluster()
        for other in sorted({r.cluster for r in unfinished if r.cluster != self.cluster}):
            report.warnings.append(
                f"jobs of cluster {other or '?'} show their last known state "
                f"(this is {self.cluster})"
            )
        return [r for r in unfinished if r.cluster == self.cluster]

    def _ask_all(self, ask: Sequence[JobRecord], report: RefreshReport) -> dict[int, StateUpdate]:
        """The whole squeue -> sacct -> scontrol chain now, each command once for all jobs."""
        tracks = {r.id: _Track() for r in ask}
        # One queue query: squeue about all, sacct about those it leaves without an end (over
        # ssh both in one round trip). Its plan costs at most a local `sinfo --version`, which
        # is no question to slurmctld and not counted.
        q = self.client.plan_queue([r.job_id for r in ask])
        try:
            report.query = answer = self.client.ask_queue(q)
        except SlurmUnavailableError:
            report.calls += q.first_calls()
            raise
        report.calls += answer.calls()
        updates = self._from_squeue(ask, tracks, answer.jobs)
        need = [r for r in ask if tracks[r.id].source is Source.SACCT]
        if need:
            updates.update(self._from_sacct(need, tracks, answer.accounting,
                                            answer.accounting_error, report))
        fallback = [r for r in need if tracks[r.id].source is Source.SCONTROL]
        if fallback:
            updates.update(self._ask_scontrol(fallback, tracks, report, shown_now=True))
        return updates

    # --- the chain's steps: each reads one command's answer about all of its jobs ------------

    def _from_squeue(
        self, jobs: Sequence[JobRecord], tracks: Mapping[int, _Track],
        live: Mapping[str, JobInfo],
    ) -> dict[int, StateUpdate]:
        updates: dict[int, StateUpdate] = {}
        for r in jobs:
            track = tracks[r.id]
            track.live = live.get(r.job_id)
            if track.live is not None:
                # An end without exit code stays unfinished (merge), so sacct is asked next.
                updates[r.id] = merge(r, track.live, None, accounting_ok=True)
            if needs_accounting(track.live):
                track.source = Source.SACCT
            elif track.live is not None and track.live.state.is_terminal:
                track.source = None
        return updates

    def _from_sacct(
        self, jobs: Sequence[JobRecord], tracks: Mapping[int, _Track],
        acct: Mapping[str, JobInfo], error: SlurmError | None, report: RefreshReport,
    ) -> dict[int, StateUpdate]:
        if error is not None:
            report.warnings.append(f"{error.what}; showing what the controller still knows")
            for r in jobs:
                tracks[r.id].source = Source.SCONTROL
            return {}
        updates: dict[int, StateUpdate] = {}
        for r in jobs:
            track, info = tracks[r.id], acct.get(r.job_id)
            updates[r.id] = merge(r, track.live, info, accounting_ok=True)
            track.source = _after_sacct(r, info, track)
        return updates

    def _ask_scontrol(
        self, jobs: Sequence[JobRecord], tracks: Mapping[int, _Track], report: RefreshReport,
        *, shown_now: bool,
    ) -> dict[int, StateUpdate]:
        """Without accounting: exit codes from the controller's memory, for a bounded few."""
        # A job squeue did not show a moment ago is gone from the controller: scontrol would
        # not know it either.
        asked = [r.id for r in jobs if not shown_now or tracks[r.id].live is not None]
        asked = asked[:MAX_SCONTROL_PER_REFRESH]
        updates: dict[int, StateUpdate] = {}
        for r in jobs:
            track, info = tracks[r.id], None
            if r.id in asked:
                report.calls += 1
                info = self.client.scontrol_job(r.job_id)
            if info is not None and not info.state.is_terminal:
                # The controller runs it (again): it is the live answer, squeue is asked next.
                updates[r.id] = merge(r, info, None, accounting_ok=False)
                track.source = Source.SQUEUE
            else:
                # Without accounting, squeue's or scontrol's end is all there will ever be.
                updates[r.id] = merge(r, track.live, info, accounting_ok=False)
                track.source = None
        return updates

    def _store(self, updates: Mapping[int, StateUpdate]) -> dict[int, JobRecord]:
        """Write the answers to the history; return the rows as stored now."""
        self.history.update(updates.values())
        fresh = {r.id: r for r in self.history.by_row_ids(list(updates))}
        self._final.update({i: r for i, r in fresh.items() if r.terminal})
        return fresh

    # --- one job, one call at a time (logs -f) -------------------------------------------------

    def poll(self, record: JobRecord) -> Poll:
        """Ask the next command in the chain about one job: one SLURM call at most."""
        track = self._tracks.setdefault(record.id, _Track())
        if self.is_final(record) or track.source is None:
            return Poll(self.latest(record), changed=False, done=True, wait_s=track.interval_s)
        before = (track.source, _shown(record))
        try:
            updates = self._step(track.source, record, track)
        except SlurmUnavailableError as e:
            # No answer is not an end: the job stays as last seen and is asked again later.
            track.interval_s = _backed_off(track.interval_s)
            return Poll(record, changed=False, done=False, wait_s=track.interval_s, error=e)
        fresh = self._store(updates).get(record.id, record)
        if track.source is None and not fresh.terminal:
            # Nobody can say more: end with the last state seen (final if it was a final one).
            state = parse_state(fresh.state)
            last = kept(fresh, terminal=state.is_terminal, stale=not state.is_terminal)
            fresh = self._store({fresh.id: last}).get(fresh.id, fresh)
        changed = (track.source, _shown(fresh)) != before
        track.interval_s = POLL_INTERVAL_S if changed else _backed_off(track.interval_s)
        done = track.source is None or fresh.terminal
        return Poll(fresh, changed=changed, done=done, wait_s=track.interval_s)

    def _step(self, source: Source, record: JobRecord, track: _Track) -> dict[int, StateUpdate]:
        tracks = {record.id: track}
        if source is Source.SQUEUE:
            return self._from_squeue([record], tracks, self.client.squeue([record.job_id]))
        if source is Source.SACCT:
            try:
                acct, error = self.client.sacct([record.job_id]), None
            except AccountingUnavailableError as e:
                acct, error = {}, e
            # The warning shows in the end state (stale, no exit code), not as a message.
            return self._from_sacct([record], tracks, acct, error, RefreshReport())
        return self._ask_scontrol([record], tracks, RefreshReport(), shown_now=False)

    def wait_for_change(
        self, record: JobRecord, *, sleep: Callable[[float], None] = time.sleep
    ) -> Poll:
        """Poll one job, backing off, until what is shown of it changes, it ends, or SLURM
        does not answer."""
        while True:
            poll = self.poll(record)
            if poll.changed or poll.done or poll.error:
                return poll
            record = poll.record
            sleep(poll.wait_s)

    # --- many jobs until they end (scale --wait) ----------------------------------------------

    def wait_until_ended(
        self, records: Sequence[JobRecord], timeout_s: float | None = None, *,
        sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
    ) -> tuple[list[JobRecord], list[JobRecord]]:
        """Refresh the jobs together, backing off while nothing shown changes, until all have
        ended or `timeout_s` has passed; return them and the ones still unfinished."""
        interval, started = POLL_INTERVAL_S, clock()
        while True:
            # A SLURM that does not answer leaves the jobs stale and unfinished: ask again later.
            fresh, _report = self.refresh(records)
            left = [r for r in fresh if not self.is_final(r)]
            if not left or (timeout_s is not None and clock() - started > timeout_s):
                return fresh, left
            same = [_shown(r) for r in records] == [_shown(r) for r in fresh]
            interval = _backed_off(interval) if same else POLL_INTERVAL_S
            records = fresh
            sleep(interval)

    # --- cancel ------------------------------------------------------------------------------

    def cancel(self, records: Sequence[JobRecord], arrays: bool = False) -> CancelReport:
        """One scancel for every unfinished job of this cluster among `records` (`arrays`:
        the arrays of array tasks, by their ids, which takes the tasks not split yet too).

        Raises SlurmUnavailableError when scancel cannot reach the controller: nothing is
        skipped or recorded on a guess.
        """
        if not records or not all(self.is_final(r) for r in records):
            # Without the cluster's name a running job would be skipped as another cluster's.
            self.require_cluster()
        report = CancelReport()
        targets: list[str] = []
        for r in records:
            if self.is_final(r):
                report.skipped[r.job_id] = f"already {self.latest(r).state}"
            elif r.cluster != self.cluster:
                report.skipped[r.job_id] = f"runs on cluster {r.cluster}, this is {self.cluster}"
            else:
                targets.append(r.job_id)
        if targets:
            try:
                self.client.scancel(list(dict.fromkeys(array_of(t) for t in targets))
                                    if arrays else targets)
            except SlurmUnavailableError as e:
                raise _not_cancelled(targets, e) from None
            report.cancelled.extend(targets)
        return report


def _not_cancelled(job_ids: Sequence[str], error: SlurmUnavailableError) -> SlurmUnavailableError:
    """scancel's failure, saying whether the request may still take effect."""
    ids = ", ".join(job_ids)
    if isinstance(error, SlurmTimeoutError) or "timed out" in error.what.lower():
        # A stopped or busy controller accepted the connection: the kernel holds the request,
        # and slurmctld carries it out when it runs again.
        return type(error)(
            f"{error.what}; job(s) {ids} may still be cancelled when the controller answers",
            "`hpctrain status` shows whether they were; cancel again if not")
    return type(error)(f"nothing was cancelled ({ids}): {error.what}", error.fix)
