"""Rules for CPUs and memory: they follow the GPUs unless given, and must fit the node."""

from __future__ import annotations

from dataclasses import dataclass

from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.text import number
from hpctrain.profiles.model import Partition, Profile
from hpctrain.units import parse_mem_mb

_MEM_ZERO = (
    "--mem 0 (all of the node's memory) is refused by some sites (Gilbreth) and "
    "hides the request; give a size, or leave --mem out for the node's share"
)


@dataclass(frozen=True)
class NodeShare:
    """What a job's GPUs entitle it to on one node under the profile's sharing rule."""

    gpus: int
    cpus: int
    mem_mb: int
    # On a partial node a request above the share is refused, not just defaulted (Raven).
    strict: bool
    whole_node_gpus: int


def node_share(profile: Profile, part: Partition, gpus_per_node: int) -> NodeShare:
    """The CPUs and memory that go with `gpus_per_node` GPUs on one node of `part`."""
    node_gpus = part.gpus_per_node
    gpus = min(gpus_per_node, node_gpus) if node_gpus else 0
    # A CPU-only job on a GPU node gets one GPU's share: CPUs and memory are dealt out per
    # GPU there, and the share of zero GPUs would be --mem=0 or --mem=1.
    cpus, mem_mb = _share(profile, part, max(gpus, 1) if node_gpus else 0)
    strict = profile.shared_node.strict and 0 < gpus < node_gpus
    return NodeShare(gpus, cpus, mem_mb, strict, node_gpus)


def _share(profile: Profile, part: Partition, gpus: int) -> tuple[int, int]:
    """CPUs and MB a job with `gpus` GPUs gets on one node under the profile's sharing rule."""
    if part.gpus_per_node == 0 or gpus >= part.gpus_per_node:
        return part.cpus_per_node, part.mem_per_node_mb
    rule = profile.shared_node
    if rule.mode == "per_gpu":
        assert rule.cpus_per_gpu is not None and rule.mem_per_gpu_mb is not None
        return (
            min(part.cpus_per_node, rule.cpus_per_gpu * gpus),
            min(part.mem_per_node_mb, rule.mem_per_gpu_mb * gpus),
        )
    cpus = max(1, part.cpus_per_node * gpus // part.gpus_per_node)
    mem = max(1, part.mem_per_node_mb * gpus // part.gpus_per_node)
    return cpus, mem


def cpus_per_task(
    req: JobRequest, part: Partition, tasks: int, share: NodeShare
) -> Outcome[int]:
    """CPUs per task: the node's share split over the tasks unless given; it must fit."""
    cpt = max(1, share.cpus // tasks) if req.cpus_per_task is None else req.cpus_per_task
    problems: tuple[str, ...] = ()
    if cpt < 1:
        problems = (f"--cpus-per-task {number(cpt)}: must be at least 1",)
        cpt = 1
    return Outcome(cpt, problems, _cpu_misfits(req.profile.name, part, tasks, cpt, share))


def _cpu_misfits(
    name: str, part: Partition, tasks: int, cpt: int, share: NodeShare
) -> tuple[str, ...]:
    used = tasks * cpt
    if used > part.cpus_per_node:
        return (
            f"{name}: {tasks} task(s) x {number(cpt)} CPUs = {number(used)} CPUs per node, but "
            f"{part.name} nodes have {part.cpus_per_node}; use --cpus-per-task "
            f"{max(1, part.cpus_per_node // tasks)}",
        )
    if share.strict and used > share.cpus:
        return (
            f"{name}: {share.gpus} GPU(s) on a shared node get at most {share.cpus} CPUs; use "
            f"--cpus-per-task {max(1, share.cpus // tasks)}, or take the whole node with "
            f"--gpus-per-node {share.whole_node_gpus}",
        )
    return ()


def memory(req: JobRequest, part: Partition, share: NodeShare) -> Outcome[int]:
    """Memory per node in MB: the node's share unless given; a given size must fit."""
    if req.mem is None:
        return Outcome(share.mem_mb)
    try:
        mem_mb = parse_mem_mb(req.mem)
    except ValueError as e:
        return Outcome(share.mem_mb, problems=(f"--mem: {e}",))
    if mem_mb == 0:
        return Outcome(share.mem_mb, problems=(_MEM_ZERO,))
    return Outcome(mem_mb, misfits=_mem_misfits(req.profile.name, part, mem_mb, share))


def _mem_misfits(name: str, part: Partition, mem_mb: int, share: NodeShare) -> tuple[str, ...]:
    if mem_mb > part.mem_per_node_mb:
        return (
            f"{name}: --mem {mem_mb} MB is more than a {part.name} node has "
            f"({part.mem_per_node_mb} MB); use --mem {part.mem_per_node_mb} or less",
        )
    if share.strict and mem_mb > share.mem_mb:
        return (
            f"{name}: {share.gpus} GPU(s) on a shared node get at most {share.mem_mb} MB; use "
            f"--mem {share.mem_mb}, or take the whole node with "
            f"--gpus-per-node {share.whole_node_gpus}",
        )
    return ()
