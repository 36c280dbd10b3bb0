"""A job's start-up, per node and rank, from the marks hpctrain.timeline and the batch script
wrote (run directory's startup/), and what took most of it: `status JOB`, `stats`, `why`.

The times are each node's clock: nodes whose clocks disagree shift each other's marks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpctrain import timeline
from hpctrain.values.rundir import RunDir

# A phase is named by the mark that ends it; a mark of a user's own is its own phase.
PHASES = {
    timeline.ENVIRONMENT_ACTIVATED: "environment",
    timeline.RANKS_LAUNCHED: "batch script",
    timeline.PROCESS_STARTED: "launch",
    timeline.IMPORTS_DONE: "imports",
    timeline.WORKER_STARTED: "fork",
    timeline.GROUP_FORMED: "process group",
    timeline.DATA_READY: "data",
    timeline.FIRST_STEP: "first step",
}
ORDER = (timeline.JOB_STARTED, *PHASES)
# More ranks than this: `status` and `why` show each node's slowest (`stats` shows all).
RANK_LINES = 8
# The importer that is the program itself is not worth naming.
_SELF = (None, "hpctrain")


@dataclass(frozen=True)
class Package:
    """A top-level package's own import seconds, and the package that first imported it."""

    name: str
    seconds: float
    via: str | None = None

    def text(self) -> str:
        via = "" if self.via in _SELF else f"{self.via} -> "
        return f"{via}{self.name} {self.seconds:.1f} s"


@dataclass(frozen=True)
class Mark:
    """A rank's start-up mark: its name, when, and the slowest packages imported by then."""

    name: str
    t: float
    packages: tuple[Package, ...] = ()


@dataclass(frozen=True)
class Track:
    """One rank's marks in time order (rank None: the batch script's)."""

    node: str
    rank: int | None
    marks: tuple[Mark, ...]

    @property
    def who(self) -> str:
        return f"{self.node} batch script" if self.rank is None else f"{self.node} rank {self.rank}"

    def at(self, name: str) -> float | None:
        return next((m.t for m in self.marks if m.name == name), None)


@dataclass(frozen=True)
class Phase:
    """The time between two marks of a rank's start-up."""

    name: str
    seconds: float
    packages: tuple[Package, ...] = ()


@dataclass(frozen=True)
class Startup:
    """One attempt of a job (its id and requeue count): the batch script's and the ranks' marks."""

    job: str | None
    restart: int
    origin: float  # the job's start, else the earliest mark
    origin_name: str
    batch: tuple[Track, ...]
    ranks: tuple[Track, ...]

    def slowest(self) -> Track | None:
        """The rank that reached its first step last (else the one whose last mark is latest)."""
        def key(t: Track) -> tuple[bool, float]:
            first = t.at(timeline.FIRST_STEP)
            return first is not None, first if first is not None else t.marks[-1].t
        return max(self.ranks, key=key, default=None)

    def path(self) -> list[Mark]:
        """The slowest rank's way from the job's start: the batch script's marks, then its own."""
        rank = self.slowest()
        batch = next((b for b in self.batch if rank and b.node == rank.node),
                     self.batch[0] if self.batch else None)
        marks = [*(batch.marks if batch else ()), *(rank.marks if rank else ())]
        return sorted(marks, key=lambda m: m.t)

    def phases(self) -> list[Phase]:
        marks = self.path()
        return [Phase(PHASES.get(m.name, m.name), m.t - prev.t, m.packages)
                for prev, m in zip(marks, marks[1:], strict=False)]

    @property
    def total_s(self) -> float | None:
        """Seconds from the origin to the slowest rank's last mark (its first step, if any)."""
        marks = self.path()
        return marks[-1].t - self.origin if marks else None

    def dominated(self) -> str:
        """`imports 15.5 s of 16.6 s: torchmetrics -> torchvision 4.5 s, ...`"""
        phases, total = self.phases(), self.total_s
        if not phases or total is None:
            return ""
        top = max(phases, key=lambda p: p.seconds)
        text = f"{top.name} {top.seconds:.1f} s of {total:.1f} s"
        return text + (": " + ", ".join(p.text() for p in top.packages) if top.packages else "")

    def headline(self) -> str:
        """The first line: how long, to what, on which rank, and what took most of it."""
        rank, total = self.slowest(), self.total_s
        if rank is None or total is None:
            return "start-up: no rank has marked its start yet"
        last = rank.marks[-1].name
        reached = ("first step" if last == timeline.FIRST_STEP else f"{last!r} (no first step "
                   "yet)")
        return (f"start-up: {reached} {total:.1f} s after the {self.origin_name} (slowest: "
                f"{rank.who}); {self.dominated()}")

    def lines(self, every_rank: bool = False) -> list[str]:
        """The headline, then each node's batch script and ranks: seconds from the origin."""
        ranks = list(self.ranks)
        if len(ranks) > RANK_LINES and not every_rank:
            ranks = _slowest_per_node(ranks)
        tracks = sorted([*self.batch, *ranks], key=lambda t: (t.node, t.rank is not None,
                                                             t.rank or 0))
        shown = [f"  {t.who}: " + ", ".join(f"{m.name} +{m.t - self.origin:.1f} s"
                                            for m in t.marks) for t in tracks]
        if len(ranks) < len(self.ranks):
            shown.append(f"  (each node's slowest of {len(self.ranks)} ranks; "
                         "`hpctrain stats` shows every rank)")
        return [self.headline(), *shown]

    def as_dict(self) -> dict[str, Any]:
        rank = self.slowest()
        return {
            "job_id": self.job, "restart": self.restart, "origin": self.origin_name,
            "origin_t": self.origin, "total_s": _round(self.total_s),
            "slowest": None if rank is None else {"node": rank.node, "rank": rank.rank},
            "dominated": self.dominated(),
            "phases": [{"phase": p.name, "seconds": _round(p.seconds)} for p in self.phases()],
            "tracks": [_track_dict(t, self.origin) for t in (*self.batch, *self.ranks)],
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _track_dict(track: Track, origin: float) -> dict[str, Any]:
    return {"node": track.node, "rank": track.rank, "marks": [
        {"mark": m.name, "at_s": _round(m.t - origin),
         **({"packages": [{"name": p.name, "seconds": p.seconds, "via": p.via}
                          for p in m.packages]} if m.packages else {})}
        for m in track.marks]}


def _slowest_per_node(ranks: Sequence[Track]) -> list[Track]:
    best: dict[str, Track] = {}
    for t in ranks:
        if t.node not in best or t.marks[-1].t > best[t.node].marks[-1].t:
            best[t.node] = t
    return list(best.values())


def _packages(raw: Any) -> tuple[Package, ...]:
    out = []
    for p in raw if isinstance(raw, list) else ():
        if isinstance(p, dict) and isinstance(p.get("name"), str) and _number(p.get("s")):
            via = p.get("via")
            out.append(Package(p["name"], float(p["s"]), via if isinstance(via, str) else None))
    return tuple(out)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _valid(row: Any) -> bool:
    return (isinstance(row, dict) and _number(row.get("t")) and isinstance(row.get("mark"), str)
            and isinstance(row.get("node"), str))


def _attempt(rows: Sequence[dict[str, Any]], job_id: str | None) -> tuple[str | None, int]:
    """The attempt to show: `job_id`'s last requeue where it has marks, else the latest."""
    def key(r: dict[str, Any]) -> tuple[str | None, int]:
        restart = r.get("restart")
        return r.get("job"), restart if isinstance(restart, int) else 0

    mine = [r for r in rows if job_id is not None and r.get("job") == job_id] or list(rows)
    return key(max(mine, key=lambda r: r["t"]))


def _tracks(rows: Sequence[dict[str, Any]]) -> list[Track]:
    """Each rank's marks (and each node's batch script's), from its process's last start."""
    by: dict[tuple[str, int | None], list[dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: r["t"]):
        rank = r.get("rank")
        by.setdefault((r["node"], rank if isinstance(rank, int) else None), []).append(r)
    tracks = []
    for (node, rank), got in by.items():
        start = timeline.PROCESS_STARTED if rank is not None else timeline.JOB_STARTED
        begins = [i for i, r in enumerate(got) if r["mark"] == start]
        kept = got[begins[-1]:] if begins else got
        tracks.append(Track(node, rank, tuple(
            Mark(r["mark"], float(r["t"]), _packages(r.get("packages"))) for r in kept)))
    return tracks


def build(rows: Iterable[Any], job_id: str | None = None) -> Startup | None:
    """The start-up of `job_id` (None: the latest attempt) from the marks' rows; None: none."""
    valid = [r for r in rows if _valid(r)]
    if not valid:
        return None
    job, restart = _attempt(valid, job_id)
    chosen = [r for r in valid if r.get("job") == job and (r.get("restart") or 0) == restart]
    tracks = _tracks(chosen)
    batch = tuple(t for t in tracks if t.rank is None)
    ranks = tuple(sorted((t for t in tracks if t.rank is not None),
                         key=lambda t: (t.node, t.rank or 0)))
    starts = [m.t for t in batch for m in t.marks if m.name == timeline.JOB_STARTED]
    origin = min(starts) if starts else min(m.t for t in tracks for m in t.marks)
    name = "job's start" if starts else "first process's start"
    return Startup(job, restart, origin, name, batch, ranks)


def read_rows(run_dir: Path) -> list[Any]:
    """Every mark in a run directory's startup/ (a line that does not parse is skipped)."""
    rows: list[Any] = []
    for path in sorted(RunDir(run_dir).startup_dir.glob("*.jsonl")):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # a line cut short by a node that died while writing it
    return rows


def read(run_dir: Path, job_id: str | None = None) -> Startup | None:
    """The start-up of `job_id` in `run_dir` (None: the latest attempt there)."""
    return build(read_rows(run_dir), job_id)
