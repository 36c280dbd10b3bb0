"""One job's accounting, every run and step of it, from one `sacct` (what `hpctrain why` reads).

Pure: the text sacct printed in, values out. `--duplicates` keeps every run of a requeued job
(one allocation row each, in order); a step's id is the part after the dot (`batch`, `extern`,
`0`, `1`, ...).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hpctrain.slurm.parsers import empty_value, parse_duration, parse_exit_code
from hpctrain.slurm.states import JobState, parse_state

# Reason is last: free text, which may hold the separator.
FIELDS = ("JobID", "JobName", "State", "ExitCode", "DerivedExitCode", "Elapsed", "Timelimit",
          "NodeList", "NNodes", "NTasks", "AllocCPUS", "ReqMem", "MaxRSS", "MaxRSSNode",
          "TotalCPU", "Start", "End", "Submit", "Reason")

_CANCELLED_BY = re.compile(r"CANCELLED by (\d+)")
_SIZE = re.compile(r"^([0-9.]+)([KMGTP]?)[nc]?$", re.IGNORECASE)
_MB = {"": 1 / (1024 * 1024), "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024,
       "P": 1024 ** 3}


def argv(job_id: str) -> tuple[str, ...]:
    return ("sacct", "--duplicates", "--parsable2", "--noheader", "--jobs", job_id,
            "--format", ",".join(FIELDS))


@dataclass(frozen=True)
class Row:
    """One row: a run of the job (`step` None) or one of its steps."""

    job_id: str
    step: str | None
    name: str
    state: JobState
    slurm_state: str
    cancelled_by_uid: int | None
    exit_code: int | None
    signal: int | None
    derived_exit_code: int | None
    derived_signal: int | None
    elapsed_s: int | None
    time_limit_s: int | None
    node_list: str | None
    nodes: int | None
    tasks: int | None
    cpus: int | None
    req_mem_mb: float | None
    max_rss_mb: float | None
    max_rss_node: str | None
    total_cpu_s: float | None
    start: str | None
    end: str | None
    submit: str | None
    reason: str | None


def summary_row(job_id: str, state: JobState, slurm_state: str, *, exit_code: int | None,
                signal: int | None, elapsed_s: int | None, time_limit_s: int | None,
                node_list: str | None) -> Row:
    """A job's run as `status` knows it (its allocation's line; no steps, no measures)."""
    # sacct's `CANCELLED by 1000`, as stored: who cancelled is named as `why` names them.
    by = _CANCELLED_BY.search(slurm_state)
    return Row(job_id=job_id, step=None, name="", state=state, slurm_state=slurm_state,
               cancelled_by_uid=int(by.group(1)) if by else None, exit_code=exit_code,
               signal=signal,
               derived_exit_code=None, derived_signal=None, elapsed_s=elapsed_s,
               time_limit_s=time_limit_s, node_list=node_list, nodes=None, tasks=None,
               cpus=None, req_mem_mb=None, max_rss_mb=None, max_rss_node=None,
               total_cpu_s=None, start=None, end=None, submit=None, reason=None)


@dataclass(frozen=True)
class Accounting:
    """Every row sacct has for the job: its runs (a requeued job has several) and steps."""

    rows: tuple[Row, ...]

    @property
    def runs(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.step is None)

    @property
    def last(self) -> Row | None:
        """The job's current (last) run."""
        runs = self.runs
        return runs[-1] if runs else None

    def steps(self) -> tuple[Row, ...]:
        """The steps of the last run (sacct lists each run's steps after it)."""
        out: list[Row] = []
        for r in self.rows:
            if r.step is None:
                out = []
            else:
                out.append(r)
        return tuple(out)


def size_mb(text: str | None) -> float | None:
    """sacct sizes (`2000M`, `1.50G`, `512K`, `1000Mn`, `0`) in MiB; None where empty."""
    value = empty_value(text or "")
    if value is None:
        return None
    m = _SIZE.match(value)
    if not m:
        return None
    return float(m.group(1)) * _MB[m.group(2).upper()]


def cpu_seconds(text: str | None) -> float | None:
    """TotalCPU (`00:00.101`, `01:02:03`, `1-02:03:04`) in seconds."""
    value = empty_value(text or "")
    if value is None:
        return None
    days, _, rest = value.rpartition("-")
    parts = rest.split(":")
    try:
        seconds = sum(float(p) * 60 ** i for i, p in enumerate(reversed(parts)))
        return seconds + (int(days) * 86400 if days else 0)
    except ValueError:
        return None


def _int(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def _row(parts: Sequence[str]) -> Row:
    (job, name, state, exit_code, derived, elapsed, limit, node_list, nodes, tasks, cpus,
     req_mem, max_rss, max_rss_node, total_cpu, start, end, submit) = parts[:len(FIELDS) - 1]
    reason = "|".join(parts[len(FIELDS) - 1:])
    job_id, _, step = job.strip().partition(".")
    code, sig = parse_exit_code(exit_code)
    dcode, dsig = parse_exit_code(derived)
    by = _CANCELLED_BY.search(state)
    return Row(
        job_id=job_id, step=step or None, name=name, state=parse_state(state),
        slurm_state=state.strip(), cancelled_by_uid=int(by.group(1)) if by else None,
        exit_code=code, signal=sig, derived_exit_code=dcode, derived_signal=dsig,
        elapsed_s=parse_duration(elapsed), time_limit_s=parse_duration(limit),
        node_list=empty_value(node_list), nodes=_int(nodes), tasks=_int(tasks),
        cpus=_int(cpus), req_mem_mb=size_mb(req_mem), max_rss_mb=size_mb(max_rss),
        max_rss_node=empty_value(max_rss_node), total_cpu_s=cpu_seconds(total_cpu),
        start=empty_value(start), end=empty_value(end), submit=empty_value(submit),
        reason=empty_value(reason))


def parse_accounting(stdout: str) -> Accounting:
    """The lines of `argv(job_id)`'s output; lines of another shape are skipped."""
    rows = []
    for line in stdout.splitlines():
        parts = line.split("|")
        if line.strip() and len(parts) >= len(FIELDS):
            rows.append(_row(parts))
    return Accounting(tuple(rows))
