"""The node_suspects table: bad nodes remembered (`hpctrain nodes`), evidence with its time."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from hpctrain.history.database import Database, utc_now


@dataclass(frozen=True, kw_only=True)
class NodeSuspect:
    """Evidence that one node of a cluster failed a job (NODE_FAIL, a stall, a GPU error)."""

    cluster: str
    node: str
    reason: str
    evidence: str
    job_id: str | None = None
    at: str = field(default_factory=utc_now)
    id: int | None = None


class SuspectsTable:
    """The history's evidence against nodes; a suspect is quarantined until cleared."""

    _db: Database

    def add_suspects(self, suspects: Sequence[NodeSuspect]) -> None:
        """Remember evidence against nodes; the same job's evidence against a node once."""
        with self._db.writing() as conn:
            for s in suspects:
                known = conn.execute(
                    "SELECT 1 FROM node_suspects WHERE cluster = ? AND node = ? AND "
                    "job_id IS ? AND reason = ?", (s.cluster, s.node, s.job_id, s.reason)
                ).fetchone()
                if known is None:
                    conn.execute(
                        "INSERT INTO node_suspects (cluster, node, reason, evidence, job_id, "
                        "at) VALUES (?, ?, ?, ?, ?, ?)",
                        (s.cluster, s.node, s.reason, s.evidence, s.job_id, s.at))

    def suspects(self, cluster: str | None = None) -> list[NodeSuspect]:
        """The evidence not cleared, oldest first (every cluster's without `cluster`)."""
        if not self._db.exists():
            return []
        where, params = ("AND cluster = ?", (cluster,)) if cluster else ("", ())
        rows = self._db.rows(
            "SELECT id, cluster, node, reason, evidence, job_id, at FROM node_suspects "
            f"WHERE cleared_at IS NULL {where} ORDER BY at, id", params)
        return [NodeSuspect(id=r[0], cluster=r[1], node=r[2], reason=r[3], evidence=r[4],
                            job_id=r[5], at=r[6]) for r in rows]

    def clear_suspects(self, cluster: str | None, nodes: Sequence[str] | None) -> int:
        """Clear the evidence against `nodes` (every node without them); how many rows."""
        clauses = ["cleared_at IS NULL"]
        params: list[object] = [utc_now()]
        if cluster:
            clauses.append("cluster = ?")
            params.append(cluster)
        if nodes is not None:
            clauses.append(f"node IN ({', '.join('?' * len(nodes))})")
            params.extend(nodes)
        with self._db.writing() as conn:
            cur = conn.execute(
                f"UPDATE node_suspects SET cleared_at = ? WHERE {' AND '.join(clauses)}", params)
        return int(cur.rowcount)

