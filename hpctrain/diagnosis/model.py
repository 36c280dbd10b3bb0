"""The values of a diagnosis: what is known of a job (Evidence), and what it says (Diagnosis)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hpctrain.diagnosis.logscan import Finding
from hpctrain.slurm.accounting import Accounting
from hpctrain.slurm.reservations import Reservation
from hpctrain.values import rundir


@dataclass(frozen=True)
class Evidence:
    """What is known of a job: its accounting, its logs' findings, its run directory."""

    job_id: str
    accounting: Accounting | None
    findings: tuple[Finding, ...] = ()
    # When it waits: SLURM's reason and its start estimate (None: none given).
    pending_reason: str | None = None
    start_estimate: str | None = None
    metrics: Mapping[str, Any] | None = None
    monitor: Mapping[str, Any] | None = None
    environment: Mapping[str, Any] | None = None
    # The job as hpctrain planned it: chain length, requeue, the Python environment.
    chain: int = 1
    requeue: bool = False
    python_env: str | None = None
    user_names: Mapping[int, str] = field(default_factory=dict)
    # The stall watcher's report (stall.json) and the stacks it names, by file name.
    stall: Mapping[str, Any] | None = None
    stall_stacks: Mapping[str, str] = field(default_factory=dict)
    # The cluster's maintenance reservations (read for a job waiting for nodes) and when.
    maintenance: Sequence[Reservation] = ()
    now: float = field(default_factory=time.time)
    # The job's time limit as submitted (accounting may not list a job that waits yet).
    time_limit_s: int | None = None

    @property
    def monitored(self) -> bool:
        """The job ran hpctrain's monitor (a step of its own, stopped with USR2 at the end):
        sacct lists its step, or (status knows no steps) its last line is in the log."""
        steps = self.accounting.steps() if self.accounting else ()
        return (any(s.name == rundir.MONITOR_STEP for s in steps)
                or any(f.kind == "monitor" for f in self.findings))


@dataclass(frozen=True)
class Diagnosis:
    """Why a job ended as it did: the cause, how to fix it, and the evidence."""

    cause: str
    summary: str
    fix: str
    evidence: tuple[str, ...] = ()
    certain: bool = True
    # A few words for `status`'s INFO column ('' when nothing went wrong).
    headline: str = ""

    def as_dict(self) -> dict[str, object]:
        return {"cause": self.cause, "summary": self.summary, "fix": self.fix,
                "evidence": list(self.evidence), "certain": self.certain,
                "headline": self.headline}


def where(f: Finding) -> str:
    """`hpctrain-12.err:45 (node2, task 1): <the line>`."""
    at = ", ".join(x for x in (f"rank {f.rank}" if f.rank else None, f.node,
                                f"task {f.task}" if f.task else None) if x)
    return f"{f.source}:{f.line_no}{f' ({at})' if at else ''}: {f.text}"


def node_of(f: Finding, ev: Evidence) -> str | None:
    """The node a finding names (NCCL's host prefix, srun's line); else the node the rank
    hook registered the finding's rank on; else, for a rank's error, the one node whose tasks
    exited with an error code. srun kills the other tasks after the first exits
    (--kill-on-bad-exit), so those say "Killed". A task's number is not its rank under
    torchrun (one task a node), hence no mapping by number. None: not known."""
    if f.node:
        return f.node
    # The rank hook's registry, kept in the monitor's summary: the rank's own node.
    registered = (ev.monitor or {}).get("ranks") or {}
    if f.rank is not None and isinstance(registered, dict) and f.rank in registered:
        return str(registered[f.rank])
    exited = {t.node for t in ev.findings if t.kind == "task_exit" and t.node}
    return exited.pop() if len(exited) == 1 else None
