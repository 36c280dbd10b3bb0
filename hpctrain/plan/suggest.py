"""A refused request's fix: the nearest request the profile accepts, found by trying them.

Fixes are not written beside the checks: a hand-made "use --gpus-per-node 4" can itself be
refused by another rule (issue 39). Here the options that shape the job (partition, nodes, GPUs,
CPUs, memory, time, QOS, constraint) are varied over what the profile offers, one change at a
time and the nearest values first; each candidate goes through the whole plan, and only one it
accepts is offered. A request too far off for a few steps is rebuilt from the profile's
defaults, taking back each option as asked or as near as is accepted. A pasted launcher's
process counts change with the shape (they are the job's ranks), and its ranks are read as
written and, over several nodes, as its count in all (issue 52).

The search is plan/nearest.py's, the values it tries and how far each goes plan/candidates.py's;
here the fix is put into the refusal, and a pasted launcher's ranks are read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hpctrain.errors import PlanError
from hpctrain.plan.candidates import Changes, partition_nodes
from hpctrain.plan.launch_front import line_counts
from hpctrain.plan.model import JobRequest
from hpctrain.plan.nearest import OPTIONS, Build, Fix, nearest_accepted, with_changes


def with_fix(err: PlanError, req: JobRequest, build: Build) -> PlanError:
    """`err` with its fix: the nearest accepted request, or word that nothing near is."""
    if not err.shape:
        return err  # each problem names its own fix; no shaping option changes them
    others = [p for p in err.problems if p not in err.shape]
    if _readings(req):
        err.fix = _line_fix(req, build, others)
        return err
    fix = nearest_accepted(req, build, others)
    if fix is not None:
        err.fix = _as_typed(req, req, fix).text()
    elif not others:
        err.fix = (f"no request near this one is accepted by profile {req.profile.name}; "
                   f"see hpctrain profiles show {req.profile.name}")
    return err


@dataclass(frozen=True)
class _Reading:
    """What a pasted launcher's counts may mean: the request laid out for that many ranks."""

    request: JobRequest
    ranks: int
    label: str


def _readings(req: JobRequest) -> list[_Reading]:
    """The ranks a pasted launcher asks for: its count on each of the job's nodes; and, over
    several nodes, its count as the ranks in all (a one-node tutorial line in a bigger job)."""
    line_nodes, per_node, total = line_counts(req.command, req.nodes)
    if per_node is None and total is not None:
        # `srun -n 5` over 2 nodes: no equal split; read as on one node, for the search.
        return [_Reading(_laid_out(req, 1, total), total, f"the line's {total} ranks")]
    if per_node is None:
        return []
    nodes = line_nodes or req.nodes
    written = _Reading(_laid_out(req, nodes, per_node), nodes * per_node,
                       f"the line's {nodes * per_node} ranks"
                       + (f" ({per_node} on each of {nodes} nodes)" if nodes > 1 else ""))
    if nodes == 1:
        return [written]
    split = next(n for n in (nodes, 1) if per_node % n == 0)
    return [written, _Reading(_laid_out(req, split, per_node // split), per_node,
                              f"{per_node} ranks in all")]


def _laid_out(req: JobRequest, nodes: int, per_node: int) -> JobRequest:
    return with_changes(req, (("nodes", nodes), ("gpus_per_node", per_node)))


def _line_fix(req: JobRequest, build: Build, others: Sequence[str]) -> str | None:
    """For a pasted launcher: each reading's nearest accepted request that keeps its ranks,
    and what the readings that none keeps would need; else the nearest accepted request."""
    readings = _readings(req)
    found = [(r, _reading_fix(req, r, build, others)) for r in readings]
    kept = [(r, f) for r, f in found if f is not None and _ranks(f) in (r.ranks, None)]
    texts = [f"for {r.label}: {f.text()}" if len(readings) > 1 else f.text() for r, f in kept]
    texts += [_needs(req, r) for r, f in found if (r, f) not in kept]
    nearest = next((f for _, f in found if f is not None), None)
    if not kept and nearest is not None:
        texts.append(nearest.text())
    return "; ".join(dict.fromkeys(texts)) or None


def _ranks(fix: Fix) -> int | None:
    return None if fix.plan is None else fix.plan.nodes * max(fix.plan.gpus_per_node, 1)


def _reading_fix(req: JobRequest, reading: _Reading, build: Build,
                 others: Sequence[str]) -> Fix | None:
    """The reading's nearest accepted request, as changes to what the user typed."""
    fix = nearest_accepted(reading.request, build, others)
    return None if fix is None else _as_typed(req, reading.request, fix)


def _as_typed(req: JobRequest, base: JobRequest, fix: Fix) -> Fix:
    """A fix found from `base` as changes to `req`, the request as typed; a command whose
    pasted counts followed the shape is one of them."""
    final = with_changes(base, fix.changes)
    changes: Changes = tuple((n, getattr(final, n)) for n in OPTIONS
                             if getattr(final, n) != getattr(req, n))
    if tuple(final.command) != tuple(req.command):
        changes += (("command", tuple(final.command)),)
    return Fix(changes, fix.plan)


def _needs(req: JobRequest, reading: _Reading) -> str:
    """Why no fix keeps a reading's ranks: more nodes than the profile allows, or no split."""
    most_gpus = max(max(p.most_gpus for p in req.profile.partitions), 1)
    most_nodes = max(partition_nodes(p) for p in req.profile.partitions)
    needed = -(-reading.ranks // most_gpus)
    name = req.profile.name
    if needed > most_nodes:
        return (f"{reading.label} need {needed} node(s) of {most_gpus} GPU(s), more than "
                f"profile {name} allows ({most_nodes})")
    return f"{reading.label} do not split into equal nodes that profile {name} accepts"
