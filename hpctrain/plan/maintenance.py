"""Maintenance windows: a job whose time limit runs into one waits until it is over.

SLURM starts a job only if its whole time limit ends before a maintenance reservation on the
nodes it would get; otherwise it sits PENDING (`ReqNodeNotAvail, Reserved for maintenance`)
until the window has passed. Pure: the submit reads the reservations and each partition's nodes
(submission/maintenance.py); this rule refuses such a job before the queue, with the longest
time that ends before the window and the rest as a chain of segments.
"""

from __future__ import annotations

from collections.abc import Sequence

from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.slurm.reservations import Reservation, minute, segments_before
from hpctrain.values.units import format_time


def blocking(req: JobRequest, partition: str, nodes: int, time_s: int,
             excluded: Sequence[str]) -> list[Reservation]:
    """The maintenance windows that leave the partition too few nodes during the job's time
    (earliest first), were it to start now."""
    if req.now is None or not req.maintenance:
        return []
    known = None if req.partition_nodes is None else req.partition_nodes.get(partition)
    out = []
    for window in sorted(req.maintenance, key=lambda r: r.start):
        if not window.overlaps(req.now, req.now + time_s):
            continue
        if known is None:
            out.append(window)
            continue
        left = set(known) - set(window.nodes) - set(excluded)
        if set(window.nodes) & set(known) and len(left) < nodes:
            out.append(window)
    return out


def maintenance_windows(req: JobRequest, partition: str, nodes: int, time_s: int,
                        trainer: bool, excluded: Sequence[str]) -> Outcome[None]:
    """A problem, with its fix, for a time limit that runs into a maintenance window."""
    found = blocking(req, partition, nodes, time_s, excluded)
    if not found or req.now is None:
        return Outcome(None)
    w = found[0]
    said = (f"maintenance reservation {w.name!r} ({_nodes(w)} of partition {partition}, "
            f"{minute(w.start)} to {minute(w.end)})")
    if w.start <= req.now:
        return Outcome(None, (f"{said} is on now: the job would wait until it ends; submit "
                              f"after {minute(w.end)} or to another partition",))
    return Outcome(None, (f"--time {format_time(time_s)} runs into {said}: SLURM would keep "
                          f"the job pending until {minute(w.end)}; "
                          f"{_fix(req, w, time_s, trainer)}",))


def _nodes(w: Reservation) -> str:
    return ", ".join(w.nodes) if len(w.nodes) <= 4 else f"{len(w.nodes)} nodes"


def _fix(req: JobRequest, w: Reservation, time_s: int, trainer: bool) -> str:
    """The longest time that ends before the window; the rest as segments of a chain."""
    assert req.now is not None
    split = segments_before(w, req.now, time_s * max(req.chain, 1))
    if split is None:
        return f"submit after {minute(w.end)}, or to a partition outside the window"
    fit, chain = split
    if not trainer:
        return (f"use --time {format_time(fit)} if the command finishes in that, or submit "
                f"after {minute(w.end)}")
    return (f"use --time {format_time(fit)} --chain {chain} (each segment goes on from the "
            f"last checkpoint; the later ones start after the window)")
