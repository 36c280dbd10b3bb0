"""Which answer about a job to believe, and what the history stores of it (pure).

squeue is the fresher source while the controller knows the job; sacct supplies exit codes
and remembers jobs the controller has purged (MinJobAge). The watcher (tracking/watcher.py)
asks; these functions decide.
"""

from __future__ import annotations

from hpctrain.history import JobRecord, StateUpdate
from hpctrain.slurm.parsers import JobInfo
from hpctrain.slurm.states import JobState


def kept(record: JobRecord, *, terminal: bool, stale: bool) -> StateUpdate:
    """The last state seen, stored again with new flags."""
    return StateUpdate(
        id=record.id, state=record.state, terminal=terminal, stale=stale,
        slurm_state=record.slurm_state, exit_code=record.exit_code, signal=record.signal,
        reason=record.reason, node_list=record.node_list, elapsed_s=record.elapsed_s,
        time_limit_s=record.time_limit_s,
    )


def _chosen(live: JobInfo | None, acct: JobInfo | None) -> JobInfo | None:
    """Which answer to believe: squeue while the controller runs the job, else sacct's end."""
    # A COMPLETING job has ended and only its nodes are still being cleaned up: its outcome
    # (CANCELLED right after a cancel, FAILED, ...) is sacct's, once slurmdbd has it.
    ended = acct is not None and acct.state.is_terminal
    if live is not None and not live.state.is_terminal \
            and not (live.state is JobState.COMPLETING and ended):
        return live
    if acct is not None and acct.state.is_terminal:
        return acct
    # Finished in squeue but not yet in slurmdbd (it lags a little), or no accounting.
    return live if live is not None else acct


def merge(
    record: JobRecord, live: JobInfo | None, acct: JobInfo | None, *, accounting_ok: bool
) -> StateUpdate:
    """Combine squeue's and sacct's answers for one job into what the history stores."""
    info = _chosen(live, acct)
    if info is None:
        # Nobody knows the job any more: keep the last state seen, marked stale.
        return kept(record, terminal=False, stale=True)
    terminal = info.state.is_terminal
    if terminal and info.source == "squeue" and info.state is not JobState.COMPLETED \
            and accounting_ok:
        # Ask sacct again next time for the exit code, rather than caching a state without it.
        terminal = False
    return StateUpdate(
        id=record.id, state=info.state.value, terminal=terminal, stale=False,
        slurm_state=info.slurm_state, exit_code=info.exit_code, signal=info.signal,
        reason=info.reason, node_list=info.node_list or (record.node_list if terminal else None),
        elapsed_s=info.elapsed_s, time_limit_s=info.time_limit_s,
    )
