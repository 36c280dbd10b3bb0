"""SLURM's start-time estimates, parsed: `sbatch --test-only` and `squeue --start` (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

# sbatch --test-only, on stderr: "sbatch: Job 432 to start at 2026-11-23T00:36:56 using 1
# processors on nodes node1 in partition debug".
_TEST_ONLY = re.compile(
    r"Job (?P<job>\d+) to start at (?P<start>\S+) using (?P<cpus>\d+) processors? "
    r"on nodes? (?P<nodes>\S+) in partition (?P<partition>\S+)"
)
# squeue writes these where it has no estimate yet (the backfill pass has not run).
_NO_TIME = {"", "n/a", "unknown", "none", "(null)"}
# Appended to the state listing's squeue format, after the free-text reason (%r): a marker
# no reason contains, so that answers with and without it parse the same.
START_FIELD = "|@start=%S"
_START_MARK = "|@start="


@dataclass(frozen=True)
class StartEstimate:
    """When and where SLURM expects a job to start (its local time, as SLURM prints it)."""

    start: str
    processors: int
    nodes: str
    partition: str

    def as_dict(self) -> dict[str, object]:
        return {"start": self.start, "processors": self.processors, "nodes": self.nodes,
                "partition": self.partition}


def parse_test_only(text: str) -> StartEstimate | None:
    """The estimate in `sbatch --test-only`'s answer; None when it holds none (a refusal)."""
    m = _TEST_ONLY.search(text)
    if m is None:
        return None
    return StartEstimate(start=m["start"], processors=int(m["cpus"]), nodes=m["nodes"],
                         partition=m["partition"])


def split_squeue_starts(stdout: str) -> tuple[str, dict[str, str | None]]:
    """squeue's answer without the START_FIELD, and job id -> expected start (None: none yet).

    Lines without the field (an older recording, another tool's format) pass unchanged.
    """
    lines, found = [], {}
    for line in stdout.splitlines():
        rest, mark, start = line.rpartition(_START_MARK)
        if not mark:
            lines.append(line)
            continue
        lines.append(rest)
        job_id = rest.partition("|")[0].strip()
        if job_id:
            found[job_id] = start_or_none(start)
    return "".join(f"{line}\n" for line in lines), found


def start_or_none(text: str) -> str | None:
    """squeue's %S: a time, or None for its words for no time (N/A, Unknown, ...)."""
    text = text.strip()
    return None if not text or text.lower() in _NO_TIME else text


def slurm_time(text: str) -> datetime | None:
    """SLURM's `2026-11-23T00:36:56` (local time) as a naive datetime; None if it is not one."""
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None


def wait_seconds(start: str, now: datetime) -> int | None:
    """Seconds from `now` (local, naive) until `start`; 0 for a start in the past."""
    when = slurm_time(start)
    return None if when is None else max(0, round((when - now).total_seconds()))


def describe(start: str | None, now: datetime) -> str:
    """`now`, `in 3 min (00:36:56)`, `in 2 h 5 min (...)`, or `unknown` for people."""
    if start is None:
        return "unknown"
    wait = wait_seconds(start, now)
    if wait is None:
        return start
    # sbatch rounds to its scheduling pass: a few seconds ahead still means "at once".
    if wait <= 5:
        return "now"
    return f"in {span(wait)} ({start.replace('T', ' ')})"


def span(seconds: float) -> str:
    """`3 min`, `2 h 5 min`, `1 d 4 h`: a wait in words, rounded up to the minute."""
    minutes = (int(seconds) + 59) // 60
    if minutes >= 24 * 60:
        return f"{minutes // 1440} d {minutes % 1440 // 60} h"
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"
