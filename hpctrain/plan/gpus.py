"""sbatch's `--gpus N` (GPUs for the whole job) as hpctrain's nodes x GPUs per node."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from hpctrain.errors import HpctrainError, PlanError
from hpctrain.plan.build import build_plan
from hpctrain.plan.model import JobRequest
from hpctrain.plan.topology import choose_partition

# How far from the asked total a fix looks: beyond twice the GPUs, the job is another one.
_REACH = 2


def with_total_gpus(req: JobRequest, total: int, nodes_given: bool) -> JobRequest:
    """`req` laid out for `total` GPUs: the split into equal nodes, fewest nodes first, that
    the plan accepts. A --nodes or --gpus-per-node given beside --gpus fixes that side."""
    if total < 1:
        raise HpctrainError(f"--gpus {total}: a job needs at least one GPU",
                            "give --gpus 1 or more, or --gpus-per-node 0 for a CPU job")
    chosen = choose_partition(req)
    part = chosen.value
    if chosen.problems:
        return req  # the plan names the profile's partitions
    if not part.most_gpus:
        raise HpctrainError(f"--gpus: partition {part.name} has no GPUs", "leave --gpus out")
    for layout in _splits(req, total, nodes_given):
        if _accepted(layout):
            return layout
    given = " with --nodes" if nodes_given else (
        " with --gpus-per-node" if req.gpus_per_node is not None else "")
    err = PlanError([f"{req.profile.name}: --gpus {total} cannot be split into equal nodes of "
                     f"partition {part.name}{given} that the profile accepts"])
    err.fix = _nearest_totals(req, total, nodes_given)
    raise err


def _splits(req: JobRequest, total: int, nodes_given: bool) -> Iterator[JobRequest]:
    """Every equal split of `total`, fewest nodes first."""
    if req.gpus_per_node is not None:
        each = req.gpus_per_node
        if each > 0 and total % each == 0:
            yield dataclasses.replace(req, nodes=total // each)
        return
    if nodes_given:
        if total % req.nodes == 0:
            yield dataclasses.replace(req, gpus_per_node=total // req.nodes)
        return
    for nodes in range(1, total + 1):
        if total % nodes == 0:
            yield dataclasses.replace(req, nodes=nodes, gpus_per_node=total // nodes)


def _accepted(req: JobRequest) -> bool:
    try:
        build_plan(dataclasses.replace(req, preview=True), suggest=False)
    except PlanError:
        return False
    return True


def _nearest_totals(req: JobRequest, total: int, nodes_given: bool) -> str:
    """The nearest GPU counts below and above `total` that split into an accepted job."""
    found: list[str] = []
    for near in (range(total + 1, _REACH * total + 1), range(total - 1, 0, -1)):
        for other in near:
            layout = next((r for r in _splits(req, other, nodes_given) if _accepted(r)), None)
            if layout is not None:
                assert layout.gpus_per_node is not None
                found.append(f"--gpus {other} ({layout.nodes} node(s) x "
                             f"{layout.gpus_per_node} GPU(s))")
                break
    if not found:
        return "no GPU count near it is accepted; see hpctrain profiles show " + req.profile.name
    return " or ".join(found) + " is accepted"
