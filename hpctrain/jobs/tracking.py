"""Which tracked jobs to show, asking SLURM about them in at most two calls, and cancelling."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hpctrain.errors import HpctrainError
from hpctrain.history import History, JobRecord, StateUpdate
from hpctrain.slurm.client import AccountingUnavailableError, SlurmClient
from hpctrain.slurm.parsers import JobInfo
from hpctrain.slurm.states import JobState, parse_state

RECENT = 20
# Without accounting, exit codes of finished jobs come from `scontrol show job`, one call per
# job; each job is asked once (it is terminal afterwards), and at most this many per refresh.
MAX_SCONTROL_PER_REFRESH = 3


@dataclass
class RefreshReport:
    """What one refresh did: how many jobs it asked about and in how many SLURM calls."""

    asked: int = 0
    calls: int = 0
    warnings: list[str] = field(default_factory=list)


def select(
    history: History, job_ids: Sequence[str] = (), *, all_jobs: bool = False, last: int = RECENT
) -> list[JobRecord]:
    """The jobs a listing shows: the given ids, everything, or unfinished + the `last` newest."""
    if job_ids:
        records = history.by_job_ids(job_ids)
        missing = [j for j in dict.fromkeys(job_ids) if j not in {r.job_id for r in records}]
        if missing:
            raise HpctrainError(
                f"job {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not in the "
                f"history ({history.path})",
                "hpctrain tracks only jobs it submitted; `hpctrain status --all` lists them",
            )
        return records
    return history.all() if all_jobs else history.recent(last)


def merge(
    record: JobRecord,
    live: JobInfo | None,
    acct: JobInfo | None,
    *,
    accounting_ok: bool,
) -> StateUpdate:
    """Combine squeue's and sacct's answers for one job into what the history stores.

    squeue is the fresher source while the controller knows the job; sacct supplies exit
    codes and remembers jobs the controller has purged (MinJobAge).
    """
    info: JobInfo | None
    if live is not None and not live.state.is_terminal:
        info = live
    elif acct is not None and acct.state.is_terminal:
        info = acct
    elif live is not None:
        # Finished in squeue but not yet in slurmdbd (it lags a little), or no accounting.
        info = live
    else:
        info = acct
    if info is None:
        # Nobody knows the job any more: keep the last state seen, marked stale.
        return StateUpdate(
            id=record.id, state=record.state, terminal=False, stale=True,
            slurm_state=record.slurm_state, exit_code=record.exit_code, signal=record.signal,
            reason=record.reason, node_list=record.node_list, elapsed_s=record.elapsed_s,
            time_limit_s=record.time_limit_s,
        )
    terminal = info.state.is_terminal
    if terminal and info.source == "squeue" and info.state is not JobState.COMPLETED \
            and accounting_ok:
        # Ask sacct again next time for the exit code, rather than caching a state without it.
        terminal = False
    return StateUpdate(
        id=record.id,
        state=info.state.value,
        terminal=terminal,
        stale=False,
        slurm_state=info.slurm_state,
        exit_code=info.exit_code,
        signal=info.signal,
        reason=info.reason,
        node_list=info.node_list or (record.node_list if terminal else None),
        elapsed_s=info.elapsed_s,
        time_limit_s=info.time_limit_s,
    )


def _needs_acct(live: JobInfo | None) -> bool:
    # COMPLETED means exit code 0 on every task, so squeue's answer is complete.
    return live is None or (live.state.is_terminal and live.state is not JobState.COMPLETED)


def refresh(
    records: Sequence[JobRecord],
    client: SlurmClient,
    history: History,
    cluster: str,
) -> tuple[list[JobRecord], RefreshReport]:
    """Ask SLURM about the unfinished jobs of `cluster` among `records`; store and return them.

    At most two calls whatever the count: one squeue for all ids, one sacct for those squeue
    no longer shows (or shows finished). Terminal jobs are cached and never asked again.
    """
    report = RefreshReport()
    ask = [r for r in records if not r.terminal and r.cluster == cluster]
    others = {r.cluster for r in records if not r.terminal and r.cluster != cluster}
    for other in sorted(others):
        report.warnings.append(
            f"jobs of cluster {other or '?'} show their last known state (this is {cluster})"
        )
    if not ask:
        return list(records), report
    report.asked = len(ask)
    before = len(client.calls)
    live = client.squeue([r.job_id for r in ask])
    need = [r for r in ask if _needs_acct(live.get(r.job_id))]
    acct: dict[str, JobInfo] = {}
    accounting_ok = True
    if need:
        try:
            acct = client.sacct([r.job_id for r in need])
        except AccountingUnavailableError as e:
            accounting_ok = False
            report.warnings.append(f"{e.what}; showing what the controller still knows")
            acct = _scontrol_fallback(need, live, client)
    updates = [
        merge(r, live.get(r.job_id), acct.get(r.job_id), accounting_ok=accounting_ok) for r in ask
    ]
    history.update(updates)
    report.calls = len(client.calls) - before
    fresh = {r.id: r for r in history.by_row_ids([r.id for r in ask])}
    return [fresh.get(r.id, r) for r in records], report


def _scontrol_fallback(
    need: Sequence[JobRecord], live: Mapping[str, JobInfo], client: SlurmClient
) -> dict[str, JobInfo]:
    """Exit codes from scontrol for the few jobs squeue saw finish (the controller's memory)."""
    out: dict[str, JobInfo] = {}
    finished = [r for r in need if r.job_id in live][:MAX_SCONTROL_PER_REFRESH]
    for r in finished:
        info = client.scontrol_job(r.job_id)
        if info is not None:
            out[r.job_id] = info
    return out


@dataclass
class CancelReport:
    cancelled: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "cancelled": self.cancelled,
            "skipped": [{"job_id": j, "reason": r} for j, r in self.skipped.items()],
        }


def cancel(records: Sequence[JobRecord], client: SlurmClient, cluster: str) -> CancelReport:
    """One scancel for every unfinished job of this cluster among `records`."""
    report = CancelReport()
    targets: list[str] = []
    for r in records:
        if r.terminal:
            report.skipped[r.job_id] = f"already {r.state}"
        elif r.cluster != cluster:
            report.skipped[r.job_id] = f"runs on cluster {r.cluster}, this is {cluster}"
        else:
            targets.append(r.job_id)
    if not targets:
        return report
    client.scancel(targets)
    report.cancelled.extend(targets)
    return report


def display_state(record: JobRecord) -> str:
    """The state as shown to people: `RUNNING`, or `RUNNING?` when it is the last one seen."""
    state = parse_state(record.state).value
    return f"{state}?" if record.stale else state


def job_dict(record: JobRecord) -> dict[str, object]:
    """One job in the documented --json shape (docs/jobs.md)."""
    return {
        "job_id": record.job_id,
        "cluster": record.cluster,
        "name": record.job_name,
        "profile": record.profile,
        "partition": record.partition,
        "nodes": record.nodes,
        "gpus_per_node": record.gpus_per_node,
        "total_gpus": record.total_gpus,
        "state": record.state,
        "slurm_state": record.slurm_state,
        "terminal": record.terminal,
        "stale": record.stale,
        "reason": record.reason,
        "exit_code": record.exit_code,
        "signal": record.signal,
        "node_list": record.node_list,
        "elapsed_s": record.elapsed_s,
        "time_limit_s": record.time_limit_s,
        "submitted_at": record.submitted_at,
        "updated_at": record.updated_at,
        "run_dir": record.run_dir,
        "script": record.script_path,
        "stdout": record.stdout_path,
        "stderr": record.stderr_path,
        "workdir": record.workdir,
        "command": record.command,
        "git_commit": record.git_commit,
        "git_dirty": record.git_dirty,
    }
