"""Rules for where the job runs: the partition, the nodes, the GPUs and the tasks on each node."""

from __future__ import annotations

from collections.abc import Sequence

from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.text import number
from hpctrain.profiles.model import NodeType, Partition
from hpctrain.values.units import Topology


def choose_partition(req: JobRequest) -> Outcome[Partition]:
    """The partition asked for; an unknown one is a problem and the default stands in for it."""
    profile = req.profile
    if req.partition is None:
        return Outcome(profile.default_partition)
    found = profile.partition(req.partition)
    if found is not None:
        return Outcome(found)
    known = ", ".join(p.name for p in profile.partitions)
    return Outcome(
        profile.default_partition,
        problems=(f"{profile.name}: unknown partition {req.partition!r}; choose one of: {known}",),
    )


def topology(req: JobRequest, part: Partition, types: Sequence[NodeType]) -> Outcome[Topology]:
    """Nodes and GPUs per node: at least one node, and GPU counts the partition can give."""
    problems: list[str] = []
    nodes = req.nodes
    if nodes < 1:
        problems.append(f"--nodes {number(nodes)}: a job needs at least 1 node")
        nodes = 1
    gpn = _default_gpus(types, nodes) if req.gpus_per_node is None else req.gpus_per_node
    if gpn < 0:
        problems.append(f"--gpus-per-node {number(gpn)}: must be 0 or more")
        gpn = 0
    name = req.profile.name
    misfits = (*_gpu_misfits(name, part, nodes, gpn), *_node_misfits(name, part, nodes, gpn))
    # Past this point the request is refused; the CPU and memory rules see the node's own.
    gpn = min(gpn, part.most_gpus)
    notes: tuple[str, ...] = _default_gpus_note(req, part, types, nodes, gpn)
    if gpn == 0 and part.most_gpus:
        notes = (f"CPU-only job on GPU partition {part.name}: it gets one GPU's share of the "
                 "node's CPUs and memory",)
    return Outcome(Topology(nodes, gpn), tuple(problems), misfits, notes)


def _default_gpus_note(req: JobRequest, part: Partition, types: Sequence[NodeType], nodes: int,
                       gpn: int) -> tuple[str, ...]:
    """Where several nodes get the smallest type's GPUs by default, say so: a user who counted
    on the largest nodes' GPUs would otherwise find half of them missing."""
    most = max((t.gpus for t in types), default=0)
    if req.gpus_per_node is not None or nodes < 2 or gpn >= most:
        return ()
    return (f"{number(gpn)} GPUs per node: the fewest of partition {part.name}'s node types, "
            f"so that every type can take the job; --gpus-per-node {most} asks for the nodes "
            f"with {most}",)


def _default_gpus(types: Sequence[NodeType], nodes: int) -> int:
    """GPUs per node when none are asked for: one; on several nodes, all of them (of the
    smallest node type, so that every type can take the job)."""
    counts = [t.gpus for t in types if t.gpus]
    if not counts:
        return 0
    return min(counts) if nodes > 1 else 1


def _gpu_misfits(name: str, part: Partition, nodes: int, gpn: int) -> tuple[str, ...]:
    node_gpus = part.most_gpus
    if gpn > node_gpus:
        if not node_gpus:
            return (f"{name}: partition {part.name} has no GPUs",)
        need = -(-gpn * nodes // node_gpus)
        if part.max_nodes is not None:
            need = min(need, part.max_nodes)
        return (
            f"{name}: {number(gpn)} GPUs on one node is impossible ({node_gpus} per node in "
            f"partition {part.name})" + _gpu_listing(part),
        )
    allowed = part.allowed_gpus_per_node
    if allowed and gpn not in allowed:
        return (
            f"{name}: {number(gpn)} GPUs per node is not allowed "
            f"(only {', '.join(map(str, allowed))})",
        )
    if not allowed and gpn == 0 and node_gpus:
        # "None means 1..gpus_per_node": GPU partitions are for GPU jobs (Gilbreth requires
        # a GPU request, docs/cluster-facts.md, "Purdue RCAC Gilbreth"); a profile opts in
        # to CPU-only jobs with 0 in allowed_gpus_per_node.
        return (
            f"{name}: partition {part.name} is for GPU jobs and --gpus-per-node 0 asks for "
            f"none (1 to {node_gpus} per node)",
        )
    return ()


def _gpu_listing(part: Partition) -> str:
    """The node types' GPUs, where the partition has types with different counts."""
    types = part.types()
    if len({t.gpus for t in types}) < 2:
        return ""
    return "; its node types: " + "; ".join(f"{t.name}: {t.gpus} GPUs" for t in types)


def _node_misfits(name: str, part: Partition, nodes: int, gpn: int) -> tuple[str, ...]:
    node_gpus = part.most_gpus
    misfits: list[str] = []
    if nodes > 1 and part.multinode_full_nodes and gpn != node_gpus and gpn <= node_gpus:
        misfits.append(
            f"{name}: multi-node jobs on {part.name} must use whole nodes ({node_gpus} GPUs "
            f"per node, not {number(gpn)})"
        )
    # The partition's per-job maximum is nodetypes.py's to say, with the other node limits.
    return tuple(misfits)
