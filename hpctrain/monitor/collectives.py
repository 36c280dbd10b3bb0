"""The ranks' collectives read from PyTorch's flight recorder: which one each rank last entered,
who never entered it, and collectives whose ranks disagree on sizes or types.

Pure: each rank's flight record (the JSON of `_dump_fr_trace_json`, which the rank hook writes
on the stall watcher's request) in, a view out. Each process group is read apart; sequence
numbers count a group's collectives in every rank alike, so the ranks of a healthy job agree
on them, and a rank that never came is the one whose last number is behind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Entry:
    """One collective a rank entered: its group, number, name, and its tensors' shapes."""

    group: str
    seq: int
    op: str
    sizes: str
    dtypes: str

    @property
    def name(self) -> str:
        """`all_reduce #4` (the backend's prefix dropped)."""
        return f"{self.op.rpartition(':')[2]} #{self.seq}"


@dataclass(frozen=True)
class Mismatch:
    """One collective whose ranks gave tensors of other shapes or types, or another op."""

    entry: str  # e.g. "all_reduce #3"
    by_rank: Mapping[int, str]  # rank -> what it gave, "[[3]] Float"

    def describe(self) -> str:
        groups: dict[str, list[int]] = {}
        for rank, gave in sorted(self.by_rank.items()):
            groups.setdefault(gave, []).append(rank)
        parts = [f"rank{'s' if len(r) > 1 else ''} {', '.join(map(str, r))} gave {gave}"
                 for gave, r in groups.items()]
        return f"{self.entry}: {'; '.join(parts)}"


@dataclass(frozen=True)
class CollectiveView:
    """What the flight records say of the job's collectives (one process group: the one
    whose ranks disagree, else the default)."""

    group: str = ""
    last: Mapping[int, Entry] = field(default_factory=dict)  # rank -> its last entry
    missing: tuple[int, ...] = ()  # ranks registered but without a record
    mismatch: Mismatch | None = None

    @property
    def newest(self) -> Entry | None:
        return max(self.last.values(), key=lambda e: e.seq, default=None)

    @property
    def behind(self) -> dict[int, Entry]:
        """Ranks whose last collective is older than the newest any rank entered."""
        top = self.newest
        return {r: e for r, e in self.last.items() if top is not None and e.seq < top.seq}

    @property
    def waiting(self) -> list[int]:
        """Ranks inside the newest collective (they cannot leave it without the others)."""
        top = self.newest
        return sorted(r for r, e in self.last.items() if top is not None and e.seq == top.seq)

    def describe(self, nodes: Mapping[int, str] | None = None) -> str:
        """`rank 1 on node1 never entered all_reduce #4 (its last: all_reduce #3); ranks 0,
        2, 3 waited in it`, or what the records show where none is behind (`nodes`: each
        rank's node, where known)."""
        where = {r: f" on {n}" for r, n in (nodes or {}).items()}
        if self.mismatch is not None:
            return f"mismatched collective {self.mismatch.describe()}"
        top = self.newest
        if top is None:
            return "no rank's flight record was read"
        behind = self.behind
        waiting = ", ".join(map(str, self.waiting))
        if not behind and self.missing:
            gone = ", ".join(f"{r}{where.get(r, '')}" for r in self.missing)
            return (f"rank{'s' if len(self.waiting) > 1 else ''} {waiting} waited in "
                    f"{top.name}; rank {gone} wrote no flight record (it never answered)")
        if not behind:
            return f"every rank's last collective is {top.name}"
        parts = [f"rank {r}{where.get(r, '')} never entered {top.name} (its last: {e.name})"
                 for r, e in sorted(behind.items())]
        return "; ".join(parts) + f"; rank{'s' if len(self.waiting) > 1 else ''} {waiting} " \
            "waited in it"


def entries(trace: Mapping[str, Any] | None) -> list[Entry]:
    """A flight record's collectives (point-to-point calls left out), oldest first."""
    out = []
    for row in (trace or {}).get("entries") or []:
        if not isinstance(row, dict) or row.get("is_p2p"):
            continue
        seq = row.get("collective_seq_id")
        if not isinstance(seq, int) or seq <= 0:
            continue
        group = row.get("process_group") or [row.get("pg_id")]
        out.append(Entry(str(group[-1] if isinstance(group, list) else group), seq,
                         str(row.get("profiling_name") or "?"),
                         str(row.get("input_sizes")), " ".join(map(str, row.get("input_dtypes")
                                                                   or []))))
    return out


# Collectives whose every rank gives a tensor of one shape and type (gather, scatter and
# all_to_all may differ by rank, and so are compared by their op alone).
SAME_SHAPE = frozenset({"all_reduce", "allreduce", "broadcast", "reduce", "all_gather",
                        "allgather", "_allgather_base", "all_gather_into_tensor",
                        "reduce_scatter", "_reduce_scatter_base", "reduce_scatter_tensor",
                        "barrier"})


def _given(e: Entry) -> str:
    op = e.op.rpartition(":")[2]
    return f"{op} {e.sizes} {e.dtypes}" if op in SAME_SHAPE else op


def _mismatch(by_rank: Mapping[int, Sequence[Entry]]) -> Mismatch | None:
    """The first collective (by number) that two ranks entered with other tensors or ops."""
    seen: dict[int, dict[int, str]] = {}
    for rank, rows in by_rank.items():
        for e in rows:
            seen.setdefault(e.seq, {})[rank] = _given(e)
    for seq in sorted(seen):
        gave = seen[seq]
        if len(set(gave.values())) > 1:
            op = next(e for rows in by_rank.values() for e in rows if e.seq == seq).op
            return Mismatch(f"{op.rpartition(':')[2]} #{seq}", dict(sorted(gave.items())))
    return None


def read(records: Mapping[int, Mapping[str, Any] | None],
         registered: Sequence[int] = ()) -> CollectiveView:
    """The view of every rank's record (`records`: rank -> its flight record, None where the
    rank wrote none); `registered`: every rank the job has, to name those without one."""
    by_group: dict[str, dict[int, list[Entry]]] = {}
    for rank, trace in records.items():
        for e in entries(trace):
            by_group.setdefault(e.group, {}).setdefault(rank, []).append(e)
    missing = tuple(sorted(set(registered) - {r for r, t in records.items() if t}))
    views = []
    for group, by_rank in sorted(by_group.items()):
        last = {r: rows[-1] for r, rows in by_rank.items() if rows}
        views.append(CollectiveView(group, last, missing, _mismatch(by_rank)))
    if not views:
        return CollectiveView(missing=missing)
    # The group that tells something: a mismatch, then ranks behind, then the busiest.
    return max(views, key=lambda v: (v.mismatch is not None, bool(v.behind), len(v.last)))


def moved(before: CollectiveView, after: CollectiveView) -> list[int]:
    """The ranks whose last collective changed between two reads: a job whose collectives
    go on is running (the ranks answer a request up to a second apart, so one read alone can
    find a running job's ranks at different numbers)."""
    return sorted(r for r, e in after.last.items()
                  if r not in before.last or before.last[r] != e)
