"""Whether a silent job is stalled, from the evidence of every rank: never silence alone.

Pure: the ranks' rows (CPU share over the silence, /proc state), their flight records'
view and their stacks in; a Verdict out. A job is stalled when its ranks show that they wait:
a collective whose ranks disagree (a mismatch), a rank stopped, a rank that never entered the
collective the others wait in and uses no CPU, every rank idle, or every stack in a
collective. Ranks that use the CPU while their collectives agree are computing, not stalled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hpctrain.monitor import stacks
from hpctrain.monitor.collectives import CollectiveView

# Below this share of one core over the silence, a rank computes nothing: it waits.
IDLE_CPU = 0.05


@dataclass(frozen=True)
class Verdict:
    """Stalled or not, the kind of evidence, what it says, and the rank it names (if one)."""

    stalled: bool
    kind: str  # mismatch, stopped, behind, idle, all_in_collective, busy, unknown
    text: str
    rank: int | None = None
    node: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"stalled": self.stalled, "kind": self.kind, "text": self.text,
                "rank": self.rank, "node": self.node}


def _cpu(rows: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    return {int(r["rank"]): float(r["cpu"]) for r in rows if r.get("cpu") is not None}


def _node(rows: Sequence[Mapping[str, Any]], rank: int) -> str | None:
    return next((str(r["node"]) for r in rows if int(r["rank"]) == rank), None)


def _nodes(rows: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    return {int(r["rank"]): str(r["node"]) for r in rows if r.get("node")}


def _shares(cpu: Mapping[int, float]) -> str:
    return ", ".join(f"rank {r} {100 * c:.0f}%" for r, c in sorted(cpu.items()))


def judge(rows: Sequence[Mapping[str, Any]], flight: CollectiveView,
          ranks: Sequence[stacks.RankStack], moved: Sequence[int] = ()) -> Verdict:
    """The verdict on a silent job; `rows`: every node's view of its ranks (rank, node, cpu:
    the share of a core over the silence, state: /proc's letter); `moved`: the ranks whose
    collectives went on between two reads of their flight records."""
    cpu = _cpu(rows)
    if moved:
        return Verdict(False, "running", f"rank{'s' if len(moved) > 1 else ''} "
                       f"{', '.join(map(str, moved))} entered new collectives between two "
                       "reads of the flight records: running, not stalled")
    if flight.mismatch is not None:
        counts: dict[str, list[int]] = {}
        for rank, gave in flight.mismatch.by_rank.items():
            counts.setdefault(gave, []).append(rank)
        odd = min(counts.values(), key=len)[0]
        return Verdict(True, "mismatch", flight.describe(_nodes(rows)), odd, _node(rows, odd))
    stopped = [r for r in rows if str(r.get("state") or "") in ("T", "t")]
    if stopped:
        first = int(stopped[0]["rank"])
        return Verdict(True, "stopped", f"rank {first} on {stopped[0]['node']} was stopped "
                       "(a SIGSTOP or a debugger: /proc says T)"
                       + (f"; {flight.describe(_nodes(rows))}" if flight.newest else ""),
                       first, str(stopped[0]["node"]))
    behind = flight.behind
    if behind and all(cpu.get(r, 0.0) < IDLE_CPU for r in behind):
        first = min(behind)
        return Verdict(True, "behind", flight.describe(_nodes(rows)), first, _node(rows, first))
    if cpu and all(c < IDLE_CPU for c in cpu.values()) and len(cpu) == len(rows):
        return Verdict(True, "idle", f"no rank used the CPU while the job was silent "
                       f"({_shares(cpu)}): every rank waits"
                       + (f"; {flight.describe(_nodes(rows))}" if flight.newest else ""))
    stuck, waiting = stacks.stuck_ranks(ranks)
    if waiting and not stuck and len(waiting) == len(rows):
        return Verdict(True, "all_in_collective", stacks.describe(ranks))
    busy = f"the ranks use the CPU ({_shares(cpu)})" if cpu else "no rank's CPU use was read"
    agree = "; their collectives agree" if flight.newest and not behind else ""
    return Verdict(False, "busy" if cpu else "unknown",
                   f"{busy}{agree}: computing, not stalled")
