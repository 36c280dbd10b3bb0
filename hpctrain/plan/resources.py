"""Rules for CPUs and memory: they follow the GPUs on the fitting node types unless given."""

from __future__ import annotations

from dataclasses import dataclass

from hpctrain.plan.model import JobRequest
from hpctrain.plan.nodetypes import Fit
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.text import number
from hpctrain.profiles.model import NodeType, Profile
from hpctrain.values.units import parse_mem_mb

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


def node_share(profile: Profile, fit: Fit, gpus_per_node: int) -> NodeShare:
    """The CPUs and memory that go with `gpus_per_node` GPUs on every node type that fits:
    the smallest of their shares, so any of those nodes can run the job."""
    shares = [_type_share(profile, t, gpus_per_node) for t in fit.types]
    return NodeShare(
        gpus=min(s.gpus for s in shares),
        cpus=min(s.cpus for s in shares),
        mem_mb=min(s.mem_mb for s in shares),
        strict=any(s.strict for s in shares),
        whole_node_gpus=min(s.whole_node_gpus for s in shares),
    )


def _type_share(profile: Profile, node: NodeType, gpus_per_node: int) -> NodeShare:
    node_gpus = node.gpus
    gpus = min(gpus_per_node, node_gpus) if node_gpus else 0
    # A CPU-only job on a GPU node gets one GPU's share: CPUs and memory are dealt out per
    # GPU there, and the share of zero GPUs would be --mem=0 or --mem=1.
    cpus, mem_mb = _share(profile, node, max(gpus, 1) if node_gpus else 0)
    strict = profile.shared_node.strict and 0 < gpus < node_gpus
    return NodeShare(gpus, cpus, mem_mb, strict, node_gpus)


def _share(profile: Profile, node: NodeType, gpus: int) -> tuple[int, int]:
    """CPUs and MB a job with `gpus` GPUs gets on one node under the profile's sharing rule."""
    if node.gpus == 0 or gpus >= node.gpus:
        return node.cpus, node.mem_mb
    rule = profile.shared_node
    if rule.mode == "per_gpu":
        assert rule.cpus_per_gpu is not None and rule.mem_per_gpu_mb is not None
        return (
            min(node.cpus, rule.cpus_per_gpu * gpus),
            min(node.mem_mb, rule.mem_per_gpu_mb * gpus),
        )
    cpus = max(1, node.cpus * gpus // node.gpus)
    mem = max(1, node.mem_mb * gpus // node.gpus)
    return cpus, mem


def cpus_per_task(req: JobRequest, tasks: int, share: NodeShare) -> Outcome[int]:
    """CPUs per task: the nodes' share split over the tasks unless given. Whether a given
    count fits a node is the node-type rule's; here only a strict share is enforced."""
    cpt = max(1, share.cpus // tasks) if req.cpus_per_task is None else req.cpus_per_task
    problems: tuple[str, ...] = ()
    if cpt < 1:
        problems = (f"--cpus-per-task {number(cpt)}: must be at least 1",)
        cpt = 1
    used = tasks * cpt
    misfits: tuple[str, ...] = ()
    if share.strict and used > share.cpus:
        misfits = (
            f"{req.profile.name}: {share.gpus} GPU(s) on a shared node get at most "
            f"{share.cpus} CPUs ({tasks} task(s) x {number(cpt)} asked); the whole node "
            f"({share.whole_node_gpus} GPUs) has them all",
        )
    return Outcome(cpt, problems, misfits)


def memory(req: JobRequest, share: NodeShare) -> Outcome[int]:
    """Memory per node in MB: the nodes' share unless given; a strict share is enforced."""
    if req.mem is None:
        return Outcome(share.mem_mb)
    try:
        mem_mb = parse_mem_mb(req.mem)
    except ValueError as e:
        return Outcome(share.mem_mb, problems=(f"--mem: {e}",))
    if mem_mb == 0:
        return Outcome(share.mem_mb, problems=(_MEM_ZERO,))
    misfits: tuple[str, ...] = ()
    if share.strict and mem_mb > share.mem_mb:
        misfits = (
            f"{req.profile.name}: {share.gpus} GPU(s) on a shared node get at most "
            f"{share.mem_mb} MB (not {mem_mb}); the whole node ({share.whole_node_gpus} GPUs) "
            "has it all",
        )
    return Outcome(mem_mb, misfits=misfits)
