"""A job's attempts inside its allocation (`--restarts`): the records of `attempts.jsonl`.

The supervisor on the batch node writes one JSON line an attempt of the launch step when it
ends; the monitor's stall watch reads them to count the restarts spent and the nodes earlier
stalls blamed; `status` and `why` show them. Pure values and one parser: standard library only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

# What followed an attempt: the supervisor started the next one (a restart; or on the next
# rendezvous port, where another program took the first: no restart spent), or it did not.
RESTART, NEXT_PORT, END = "restart", "next port", "end"


@dataclass(frozen=True)
class Attempt:
    """One attempt: its number (0 the first), its job, when it ran, how its step ended
    (`rc`; 128 + N for a signal), why (`cause`), the node a stall blamed, what followed."""

    attempt: int
    job: str
    started: float
    ended: float
    rc: int
    cause: str
    then: str
    port: int | None = None
    suspect_node: str | None = None
    # The job's stderr between the attempt's start and its end: `why` reads that slice.
    stderr_from: int | None = None
    stderr_to: int | None = None
    requeue: int = 0  # SLURM_RESTART_COUNT: a requeued job runs its attempts again, under one id

    def line(self) -> str:
        """The record as its line of attempts.jsonl."""
        return json.dumps(asdict(self), sort_keys=True) + "\n"


def parse_attempts(text: str) -> list[Attempt]:
    """Every whole record of an attempts.jsonl; a torn or foreign line is skipped."""
    out = []
    for raw in text.splitlines():
        try:
            data = json.loads(raw)
            out.append(Attempt(**data))
        except (ValueError, TypeError):
            continue
    return out


def read_attempts(path: Path, job: str | None) -> list[Attempt]:
    """The attempts in an attempts.jsonl of `job` (None: every job's); none without the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return []
    return [a for a in parse_attempts(text) if job is None or a.job == job]


def of_segment(attempts: Sequence[Attempt], job: str, requeue: int) -> list[Attempt]:
    """The attempts of one run of a job's batch script (a requeued job runs it again under the
    same id, with its restarts afresh; a run directory holds a chain's jobs too)."""
    return [a for a in attempts if a.job == job and a.requeue == requeue]


def restarts_spent(attempts: Sequence[Attempt]) -> int:
    """How many restarts these attempts used."""
    return sum(1 for a in attempts if a.then == RESTART)


def blamed_nodes(attempts: Sequence[Attempt]) -> set[str]:
    """The nodes an earlier stall of these attempts pointed at."""
    return {a.suspect_node for a in attempts if a.suspect_node}


def describe(attempts: Sequence[Attempt]) -> list[str]:
    """One line an attempt, for `status` and `why`: when, how long, how it ended, what then."""
    lines = []
    for a in attempts:
        when = time.strftime("%H:%M:%S", time.localtime(a.started))
        then = ("restarted inside the job" if a.then == RESTART else
                "started again on the next port" if a.then == NEXT_PORT else
                "the end of this run of the job" if a.cause != "completed" else "done")
        segment = f" after requeue {a.requeue}" if a.requeue else ""
        lines.append(f"attempt {a.attempt + 1}{segment} ({when}, {a.ended - a.started:.0f} s): "
                     f"{a.cause} -> {then}")
    return lines
