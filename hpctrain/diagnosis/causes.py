"""Why a job ended (or waits): one diagnosis with its evidence and one fix.

Pure: an Evidence value in, a Diagnosis out. The rules are tried in order and the first that
applies wins; each one names the lines it stands on. Where nothing decides, the diagnosis says
so (`certain` False) and shows what was found: never a guess stated as a fact. The rules of what
SLURM's accounting says are here; the others, by what they read, in limits.py, program.py,
peers.py and stall.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from hpctrain.diagnosis.container import container
from hpctrain.diagnosis.facts import (
    SIGNALS,
    failed_tasks,
    first,
    first_failed_task,
    step_signal,
    training_progress,
)
from hpctrain.diagnosis.limits import host_memory, stopped, time_limit
from hpctrain.diagnosis.model import Diagnosis, Evidence, where
from hpctrain.diagnosis.peers import collective, gpu_fault, teardown
from hpctrain.diagnosis.pending import maintenance_in_way, pending_diagnosis
from hpctrain.diagnosis.program import (
    cuda_oom,
    exception,
    import_error,
    missing_file,
    signal,
    usage,
)
from hpctrain.diagnosis.stall import stalled
from hpctrain.slurm.accounting import Row
from hpctrain.slurm.states import JobState
from hpctrain.values.units import format_time


def _cancelled(ev: Evidence, last: Row) -> Diagnosis | None:
    if last.state is not JobState.CANCELLED:
        return None
    uid = last.cancelled_by_uid
    who = ev.user_names.get(uid, f"user id {uid}") if uid is not None else "someone"
    return Diagnosis(
        "cancelled", f"the job was cancelled by {who} at {last.end or '?'}",
        "submit it again if that was not meant; `hpctrain rerun JOB` runs the same code",
        evidence=(f"sacct: State {last.slurm_state}, End {last.end}",))


def _node_fail(ev: Evidence, last: Row) -> Diagnosis | None:
    said = first(ev, "node_fail")
    if last.state is not JobState.NODE_FAIL and said is None:
        return None
    return Diagnosis(
        "node_failure", f"a node of the job failed ({last.node_list or '?'}): not the job's "
        "fault", "submit again (hpctrain's requeue takes it up from the last checkpoint when "
        "SLURM requeues it); report the node if it happens again",
        evidence=tuple(filter(None, (f"sacct: State {last.slurm_state}, NodeList "
                                     f"{last.node_list}", where(said) if said else None))))


def _preempted(ev: Evidence, last: Row) -> Diagnosis | None:
    said = first(ev, "preempted")
    if last.state is not JobState.PREEMPTED and said is None:
        return None
    return Diagnosis(
        "preempted", "a job of higher priority took the nodes (preemption)",
        "keep `--requeue` on (the default) so that it continues from its checkpoint, or use "
        "a partition or QOS that is not preempted",
        evidence=tuple(filter(None, (f"sacct: State {last.slurm_state}",
                                     where(said) if said else None))))


def _nonzero(ev: Evidence, last: Row) -> Diagnosis | None:
    if last.state is not JobState.FAILED:
        return None
    task = first_failed_task(ev)
    code = last.exit_code
    return Diagnosis(
        "exit_code", f"the job's command exited with code {code} and printed no error "
        "hpctrain recognises", "read the end of its output (`hpctrain logs JOB`); an exit code "
        "is the program's own", certain=False,
        evidence=tuple(filter(None, (f"sacct: State {last.slurm_state}, ExitCode "
                                     f"{last.exit_code}:{last.signal}",
                                     where(task) if task else None))))


def _completed(ev: Evidence, last: Row) -> Diagnosis | None:
    if last.state is not JobState.COMPLETED:
        return None
    return Diagnosis("completed", "the job completed; nothing went wrong",
                     "see below what to ask for next time",
                     evidence=(f"sacct: State {last.slurm_state}, ExitCode 0",))


# Most specific first: what the logs name beats what the state says.
RULES: tuple[Callable[[Evidence, Row], Diagnosis | None], ...] = (
    _node_fail, _preempted, stalled, gpu_fault, time_limit, _cancelled, stopped, _completed,
    host_memory, container, cuda_oom, import_error, missing_file, usage, exception, teardown,
    collective, signal, _nonzero,
)


_HEADLINES = {"cuda_oom": "GPU out of memory", "teardown_race": "gloo's teardown race",
              "collective_mismatch": "mismatched collective",
              "usage_error": "command line refused", "host_memory": "out of host memory",
              "collective_timeout": "a collective timed out", "node_failure": "node failure",
              "preempted": "preempted", "stopped": "stopped, not taken up",
              "stalled": "stalled"}


def headline(d: Diagnosis, ev: Evidence, last: Row) -> str:
    """A few words of `d` for a table column."""
    found = first(ev, d.cause)
    info = found.info if found else {}
    if d.cause == "exception":
        who = f"rank {found.rank}: " if found and found.rank else ""
        return f"{who}{info.get('type')}: {info.get('message')}"[:80]
    if d.cause == "import_error":
        return f"no module {info.get('module')}"
    if d.cause == "gpu_fault":
        return f"GPU fault: {info.get('what')}"
    if d.cause == "container":
        return f"container: {info.get('what', '?').replace('_', ' ')}"
    if d.cause == "missing_file":
        return f"no file {info.get('path')}"
    if d.cause == "time_limit":
        progress = training_progress(ev)
        return "time limit" + (f" at epoch {progress[0]}/{progress[1]}" if progress else "")
    if d.cause == "signal":
        sig = last.signal or step_signal(ev)
        if sig:
            return SIGNALS.get(sig, f"signal {sig}").split(" ")[0]
        task = next((f for f in failed_tasks(ev) if f.kind == "task_signal"), None)
        return task.info["what"] if task else "killed by a signal"
    if d.cause == "exit_code":
        return f"exit {last.exit_code}"
    if d.cause == "cancelled":
        return d.summary.removeprefix("the job was ").partition(" at ")[0]
    return _HEADLINES.get(d.cause, "")


def diagnose(ev: Evidence) -> Diagnosis:
    """The job's diagnosis; see RULES for the order."""
    last = ev.accounting.last if ev.accounting else None
    if ev.pending_reason is not None or (last and last.state is JobState.PENDING):
        reason = ev.pending_reason or (last.reason if last else None)
        limit = (last.time_limit_s if last else None) or ev.time_limit_s
        return pending_diagnosis(reason, ev.start_estimate,
                                 maintenance_in_way(reason, ev.maintenance, ev.now, limit),
                                 ev.now, limit)
    if last is None:
        return Diagnosis("unknown", f"SLURM's accounting has no record of job {ev.job_id}",
                         "check the job id; `hpctrain status` shows what hpctrain knows",
                         certain=False)
    if last.state in (JobState.RUNNING, JobState.COMPLETING, JobState.SUSPENDED):
        return Diagnosis("running", f"the job is {last.state.value.lower()} "
                         f"({format_time(last.elapsed_s or 0)} of "
                         f"{format_time(last.time_limit_s or 0)})",
                         "ask again once it has ended", evidence=(f"sacct: State "
                                                                  f"{last.slurm_state}",))
    for rule in RULES:
        found = rule(ev, last)
        if found is not None:
            return dataclasses.replace(found, headline=headline(found, ev, last))
    return Diagnosis("unknown", f"the job ended {last.slurm_state}; nothing in its accounting "
                     "or logs says why", "read its output: `hpctrain logs JOB`", certain=False,
                     evidence=(f"sacct: State {last.slurm_state}",))
