"""What the job's ranks report in the run directory: their progress (hpctrain.progress) and
their registrations (the rank hook), and the stall window their step times give."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hpctrain.monitor.silence import CEILING_S, FLOOR_S, STEP_FACTOR
from hpctrain.values.rundir import RunDir


@dataclass(frozen=True)
class RankProgress:
    """A rank's last progress report: its step, when, and how long a step takes."""

    node: str
    rank: int
    pid: int
    step: int
    t: float
    step_s: float | None


def read_progress(run_dir: Path, since: float) -> list[RankProgress]:
    """Every rank's last record written at or after `since` (an earlier segment's are stale)."""
    out = []
    for path in sorted(RunDir(run_dir).progress_dir.glob("*.json")):
        try:
            row = json.loads(path.read_text(encoding="utf-8"))
            rank = RankProgress(str(row["node"]), int(row["rank"]), int(row["pid"]),
                                int(row["step"]), float(row["t"]),
                                None if row.get("step_s") is None else float(row["step_s"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # half a file from another writer: read it at the next check
        if rank.t >= since:
            out.append(rank)
    return out


def read_ranks(run_dir: Path, since: float) -> list[RankProgress]:
    """Every rank the job has: those the rank hook registered (a process group's ranks) and
    those that report progress, the progress record kept where a rank has both."""
    found = {(r.node, r.rank): r for r in registered_ranks(run_dir, since)}
    found.update({(r.node, r.rank): r for r in read_progress(run_dir, since)})
    return sorted(found.values(), key=lambda r: r.rank)


def registered_ranks(run_dir: Path, since: float) -> list[RankProgress]:
    """The ranks the rank hook registered at or after `since` (rank-registry/)."""
    out = []
    for path in sorted(RunDir(run_dir).ranks_dir.glob("*.json")):
        try:
            row = json.loads(path.read_text(encoding="utf-8"))
            rank = RankProgress(str(row["node"]), int(row["rank"]), int(row["pid"]), 0,
                                float(row["t"]), None)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if rank.t >= since:
            out.append(rank)
    return out


def window_s(ranks: Sequence[RankProgress], override: float | None) -> float:
    """The job's own window, else STEP_FACTOR slowest step times within the floor and ceiling."""
    if override is not None:
        return override
    times = [r.step_s for r in ranks if r.step_s]
    if not times:
        return FLOOR_S
    return min(CEILING_S, max(FLOOR_S, STEP_FACTOR * max(times)))


def silent_s(ranks: Sequence[RankProgress], now: float) -> float | None:
    """Seconds since any rank last reported (None: none has reported yet)."""
    return now - max(r.t for r in ranks) if ranks else None
