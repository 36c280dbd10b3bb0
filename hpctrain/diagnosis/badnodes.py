"""Bad nodes remembered: which node a job's failure points at, and which nodes are quarantined.

Pure: a diagnosis and what SLURM says of the job's nodes in, suspects out; suspects and a
clock in, the quarantine out. The history keeps the suspects (`hpctrain nodes` lists them);
a submit excludes the quarantined nodes of its cluster (docs/long-runs.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from hpctrain.history import NodeSuspect
from hpctrain.slurm.hostlist import expand_nodes
from hpctrain.slurm.states import JobState

if TYPE_CHECKING:
    # Only for the suspects of a diagnosis: every submit reads the quarantine, not these.
    from hpctrain.diagnosis.model import Diagnosis, Evidence
    from hpctrain.slurm.accounting import Row

# How long a suspect stays quarantined after its latest evidence, unless the job asks otherwise
# (`HPCTRAIN_QUARANTINE_HOURS`, `hpctrain nodes clear`).
QUARANTINE_HOURS = 24.0
# SLURM node states that say the node itself is unwell, not busy.
_UNWELL = ("down", "drain", "fail", "not_responding", "no_respond", "unknown")


@dataclass(frozen=True)
class Quarantined:
    """A node kept from new jobs, until when, and the failed jobs that put it there."""

    cluster: str
    node: str
    since: str
    until: str
    reasons: tuple[str, ...]
    jobs: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        return {"cluster": self.cluster, "node": self.node, "since": self.since,
                "until": self.until, "reasons": list(self.reasons), "jobs": list(self.jobs)}


def needs_node_states(diagnosis: Diagnosis, ev: Evidence) -> bool:
    """Whether naming this job's suspects needs SLURM's node states (a node failed)."""
    return diagnosis.cause == "node_failure" or bool(_node_failed_runs(ev))


def suspects(diagnosis: Diagnosis, ev: Evidence, cluster: str,
             node_states: Mapping[str, str]) -> list[NodeSuspect]:
    """The nodes this ended job's failure points at (none where it points at none or all).
    A run SLURM requeued after a node failure counts too, though the job then completed."""
    found = [s for run in _node_failed_runs(ev)
             for s in _node_failure(ev, run.node_list, cluster, node_states)]
    if diagnosis.cause == "stalled":
        found += _stall_suspects(ev, cluster)
    elif diagnosis.cause == "gpu_fault":
        found += _gpu_fault_suspects(ev, cluster)
    elif diagnosis.cause == "node_failure" and not found:
        last = ev.accounting.last if ev.accounting else None
        said = next((f.node for f in ev.findings if f.kind == "node_fail" and f.node), None)
        found = _node_failure(ev, said or (last.node_list if last else None), cluster,
                              node_states)
    return list({(s.node, s.reason): s for s in found}.values())


def _node_failed_runs(ev: Evidence) -> list[Row]:
    return [r for r in (ev.accounting.runs if ev.accounting else ())
            if r.state is JobState.NODE_FAIL]


def _node_failure(ev: Evidence, node_list: str | None, cluster: str,
                  node_states: Mapping[str, str]) -> list[NodeSuspect]:
    nodes = expand_nodes(node_list)
    unwell = [n for n in nodes if any(w in node_states.get(n, "").lower() for w in _UNWELL)]
    # Without a node SLURM calls unwell, one node of a one-node job is still the one.
    picked = unwell or (nodes if len(nodes) == 1 else [])
    return [NodeSuspect(cluster=cluster, node=n, reason="node_failure", job_id=ev.job_id,
                        evidence=f"job {ev.job_id} ended NODE_FAIL; SLURM calls {n} "
                        f"{node_states.get(n, 'unknown')}") for n in picked]


def _gpu_fault_suspects(ev: Evidence, cluster: str) -> list[NodeSuspect]:
    """A GPU or driver error that the ranks of one node alone show points at that node."""
    from hpctrain.diagnosis.model import node_of

    faults = [f for f in ev.findings if f.kind == "gpu_fault"]
    nodes = {n for f in faults if (n := node_of(f, ev))}
    if len(nodes) != 1:
        return []
    node = nodes.pop()
    what = next(f.info.get("what", "") for f in faults if node_of(f, ev) == node)
    return [NodeSuspect(cluster=cluster, node=node, reason="gpu_fault", job_id=ev.job_id,
                        evidence=f"job {ev.job_id}: {what} on {node}")]


def _stall_suspects(ev: Evidence, cluster: str) -> list[NodeSuspect]:
    """A stall whose ranks outside the collective all live on one node points at that node."""
    from hpctrain.monitor import stacks

    ranks = stacks.ranks_of((ev.stall or {}).get("nodes") or [], ev.stall_stacks)
    node = stacks.suspect_node(ranks)
    if node is None:
        return []
    return [NodeSuspect(cluster=cluster, node=node, reason="stall", job_id=ev.job_id,
                        evidence=f"job {ev.job_id} stalled: {stacks.describe(ranks)}")]


def quarantined(found: Sequence[NodeSuspect], now: datetime, hours: float
                ) -> list[Quarantined]:
    """Each node whose latest evidence is younger than `hours`, with all its evidence."""
    by_node: dict[tuple[str, str], list[NodeSuspect]] = {}
    for s in found:
        by_node.setdefault((s.cluster, s.node), []).append(s)
    out = []
    for (cluster, node), items in sorted(by_node.items()):
        latest = max(datetime.fromisoformat(s.at) for s in items)
        until = latest + timedelta(hours=hours)
        if until > now:
            out.append(Quarantined(cluster, node, min(s.at for s in items),
                                   until.isoformat(timespec="seconds"),
                                   tuple(dict.fromkeys(s.reason for s in items)),
                                   tuple(dict.fromkeys(s.job_id for s in items if s.job_id))))
    return out


def quarantine_hours(text: str | None) -> float:
    """`HPCTRAIN_QUARANTINE_HOURS` (0 turns the quarantine off); the default where unset."""
    try:
        value = float(text) if text else QUARANTINE_HOURS
    except ValueError:
        return QUARANTINE_HOURS
    return max(value, 0.0)
