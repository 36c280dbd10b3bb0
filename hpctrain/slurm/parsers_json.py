"""Pure parsers for `squeue --json` and `sacct --json` (SLURM 23.02 on; slurm/versions.py).

They give the same JobInfo as the text parsers (slurm/parsers.py) for the same job: the
state SLURM's text prints, the reason, exit code and signal, node list and count, elapsed
time and limit. tests/jobs/recorded/slurm-24.11/ holds both forms of the same jobs, and a test
compares them field by field.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from hpctrain.errors import SlurmError
from hpctrain.slurm.parsers import JobInfo, empty_value
from hpctrain.slurm.states import PENDING as WAITING
from hpctrain.slurm.states import JobState, parse_state

# SLURM's text shows a job's flag instead of its base state, in this order of precedence
# (job_state_string() in src/common/slurm_protocol_defs.c); JSON lists base state and flags.
_FLAGS_SHOWN = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED",
                "REQUEUE_HOLD", "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD",
                "SIGNALING")


def load_jobs(stdout: str, command: str) -> list[dict[str, Any]]:
    """The `jobs` list of a JSON answer; SlurmError naming the command when it has none."""
    try:
        doc = json.loads(stdout)
    except json.JSONDecodeError as e:
        raise SlurmError(f"{command} --json printed something that is not JSON ({e.msg})",
                         "HPCTRAIN_SLURM_JSON=0 makes hpctrain use SLURM's text output") from None
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        raise SlurmError(f"{command} --json printed no list of jobs",
                         "HPCTRAIN_SLURM_JSON=0 makes hpctrain use SLURM's text output")
    return [j for j in jobs if isinstance(j, dict)]


def shown_state(states: Sequence[str] | str) -> str:
    """The state SLURM's text would print for JSON's [base, flags...] (a string in old schemas)."""
    if isinstance(states, str):
        return states
    flags = set(states[1:])
    return next((f for f in _FLAGS_SHOWN if f in flags), states[0] if states else "")


def number(value: Any) -> int | None:
    """data_parser's {"set", "infinite", "number"} (or a bare number) -> int; None if unset."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _exit(job: dict[str, Any], st: JobState) -> tuple[int | None, int | None]:
    """(exit status, signal) for an ended job, as text's `2:0`; (None, None) before the end."""
    if not st.is_terminal:
        return None, None
    code = job.get("exit_code")
    if not isinstance(code, dict):
        return None, None
    signal = code.get("signal")
    sig = number(signal.get("id")) if isinstance(signal, dict) else None
    return number(code.get("return_code")), sig or 0


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _minutes(value: Any) -> int | None:
    n = number(value)
    return None if n is None else n * 60


def _job_info(job: dict[str, Any], slurm_state: str, reason: str | None, source: str,
              elapsed: int | None, limit: int | None, nodes: int | None) -> JobInfo:
    st = parse_state(slurm_state)
    code, sig = _exit(job, st)
    return JobInfo(
        job_id=str(job.get("job_id")),
        state=st,
        slurm_state=slurm_state,
        source=source,
        # As the text parsers: a reason only while the job waits (SLURM keeps the last one).
        reason=empty_value(reason or "") if st in WAITING else None,
        exit_code=code,
        signal=sig,
        node_list=empty_value(str(job.get("nodes") or "")),
        nodes=nodes,
        elapsed_s=elapsed,
        time_limit_s=limit,
    )


def _squeue_elapsed(job: dict[str, Any], st: JobState, now: float) -> int | None:
    """Time used, as squeue's %M: none before the start, up to now or to the end."""
    start = number(job.get("start_time"))
    if st in (JobState.PENDING, JobState.REQUEUED) or not start:
        return 0
    end = number(job.get("end_time"))
    stop = end if st.is_terminal and end else int(now)
    return max(0, stop - start)


def local_time(epoch: int | None) -> str | None:
    """An epoch as squeue's text prints times (local time, ISO 8601 to the second)."""
    if not epoch:
        return None
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%dT%H:%M:%S")


def parse_squeue_json(stdout: str, now: float) -> tuple[dict[str, JobInfo], dict[str, str | None]]:
    """`squeue --json --jobs ...` -> (jobs by id, each one's start: expected while it waits)."""
    jobs: dict[str, JobInfo] = {}
    starts: dict[str, str | None] = {}
    for job in load_jobs(stdout, "squeue"):
        state = shown_state(job.get("job_state") or "")
        st = parse_state(state)
        info = _job_info(job, state, job.get("state_reason"), "squeue",
                         _squeue_elapsed(job, st, now), _minutes(job.get("time_limit")),
                         number(job.get("node_count")))
        jobs[info.job_id] = info
        # As squeue's %S: the expected start of a waiting job, the actual one of the others.
        starts[info.job_id] = local_time(number(job.get("start_time")))
    return jobs, starts


def parse_scontrol_job_json(stdout: str, now: float) -> JobInfo | None:
    """`scontrol --json show job ID`: the job as squeue's JSON has it (the same schema), read
    as the text parser reads `scontrol -o show job` (a reason only while it waits)."""
    jobs, _ = parse_squeue_json(stdout, now)
    info = next(iter(jobs.values()), None)
    return None if info is None else replace(info, source="scontrol")


def _sacct_nodes(job: dict[str, Any]) -> int | None:
    """Nodes as sacct's NNodes: those allocated, or those asked for by a job that got none."""
    allocated = number(job.get("allocation_nodes"))
    if allocated:
        return allocated
    requested = _object(job.get("tres")).get("requested")
    counts = [number(t.get("count")) for t in requested or () if isinstance(t, dict)
              and t.get("type") == "node"]
    return counts[0] if counts and counts[0] is not None else allocated


def parse_sacct_json(stdout: str) -> dict[str, JobInfo]:
    """`sacct --json --jobs ...` -> jobs by id; a requeued job's last run stands for it."""
    out: dict[str, JobInfo] = {}
    for job in load_jobs(stdout, "sacct"):
        state = _object(job.get("state"))
        times = _object(job.get("time"))
        shown = shown_state(state.get("current") or "")
        info = _job_info(job, shown, state.get("reason"), "sacct", number(times.get("elapsed")),
                         _minutes(times.get("limit")), _sacct_nodes(job))
        out[info.job_id] = info
    return out
