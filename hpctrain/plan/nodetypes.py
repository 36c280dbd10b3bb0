"""Rules for which node types of a partition can run the job, and the --constraint that keeps
it on them (Gilbreth's a100-80gb mixes 2-GPU K and I nodes with 4-GPU J nodes)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.text import CONSTRAINT, number, unsafe_name
from hpctrain.profiles.model import NodeType, Partition
from hpctrain.values.units import parse_mem_mb

_OPERATORS = ("|", "&")


@dataclass(frozen=True)
class Fit:
    """The node types a job can run on (never empty), and the constraint to emit."""

    types: tuple[NodeType, ...]
    constraint: str | None
    gpu_type: str | None

    @property
    def names(self) -> tuple[str, ...]:
        """The fitting types' names, in the profile's order."""
        return tuple(t.name for t in self.types)


def describe(part: Partition, t: NodeType) -> str:
    """What one node type allows, for a refusal: `K: 2 GPUs, 64 CPUs, 512000 MB, 52 nodes,
    features K`."""
    gpu = part.gpu_type_of(t)
    gpus = f"{t.gpus} GPUs" + (f" ({gpu})" if gpu and gpu != part.gpu_type else "")
    nodes = "" if t.nodes is None else f", {t.nodes} nodes"
    feats = f", features {','.join(t.features)}" if t.features else ""
    return f"{t.name}: {gpus}, {t.cpus} CPUs, {t.mem_mb} MB{nodes}{feats}"


def listing(part: Partition, types: Sequence[NodeType]) -> str:
    """Every type with what it allows, joined for a message."""
    return "; ".join(describe(part, t) for t in types)


def parse_constraint(expr: str) -> tuple[str, list[str]] | None:
    """`A|B` -> ("|", [A, B]); `A&B` -> ("&", ...); `A` -> ("|", [A]); None for anything else."""
    ops = [op for op in _OPERATORS if op in expr]
    if len(ops) > 1 or any(c in expr for c in "[]*:,"):
        return None
    op = ops[0] if ops else "|"
    terms = expr.split(op)
    return (op, terms) if all(terms) else None


def _selects(part: Partition, op: str, terms: Sequence[str]) -> Callable[[NodeType], bool]:
    # A listed constraint that no type carries is taken to hold on every node of the partition.
    everywhere = {f for f in part.features() if not any(f in t.features for t in part.types())}

    def has(t: NodeType, f: str) -> bool:
        return f in t.features or f in everywhere

    if op == "&":
        return lambda t: all(has(t, f) for f in terms)
    return lambda t: any(has(t, f) for f in terms)


def selected_types(req: JobRequest, part: Partition) -> Outcome[list[NodeType]]:
    """The partition's node types that the job's constraint (given or default) selects."""
    types = part.types()
    expr = req.constraint or part.default_constraint
    if expr is None:
        return Outcome(types)
    if req.constraint is not None:
        bad = unsafe_name(req.constraint, CONSTRAINT, "--constraint")
        if bad:
            return Outcome(types, problems=bad)
    parsed = parse_constraint(expr)
    name = req.profile.name
    if parsed is None:
        return Outcome(types, problems=(
            f"--constraint {expr!r}: hpctrain understands one feature, A|B or A&B; "
            "pass counts and brackets with a plain sbatch script",
        ))
    known = part.features()
    unknown = [f for f in parsed[1] if f not in known]
    if unknown:
        return Outcome(types, misfits=(
            f"{name}: partition {part.name} has no constraint {unknown[0]!r}; "
            f"known: {', '.join(known) or 'none'}",
        ))
    chosen = [t for t in types if _selects(part, *parsed)(t)]
    if not chosen:
        return Outcome(types, misfits=(
            f"{name}: --constraint {expr} selects no node type of partition {part.name}; "
            f"its types: {listing(part, types)}",
        ))
    return Outcome(chosen)


# A stage keeps the types that can give what the request asks, or says why none can.
Stage = Callable[
    [JobRequest, Partition, list[NodeType], int, int], tuple[list[NodeType], str | None]
]


def fit_node_types(
    req: JobRequest, part: Partition, base: list[NodeType], nodes: int, gpn: int, tasks: int
) -> Outcome[Fit]:
    """Narrow `base` to the types with the GPUs, CPUs and memory asked for, stage by stage;
    the first stage that leaves none is the misfit, and the types before it stand in."""
    types = base
    misfits: list[str] = []
    stages: tuple[Stage, ...] = (_gpu_stage, _cpu_stage, _mem_stage)
    for stage in stages:
        kept, why = stage(req, part, types, gpn, tasks)
        if why:
            misfits.append(why)
            break
        types = kept
    constraint, notes = _constraint(req, part, base, types)
    misfits.extend(_node_limit(req, part, types, constraint, nodes))
    gpu_types = {part.gpu_type_of(t) for t in types} - {None}
    gpu_type = gpu_types.pop() if len(gpu_types) == 1 and gpn else None
    return Outcome(Fit(tuple(types), constraint, gpu_type), misfits=tuple(misfits),
                   notes=notes)


def _gpu_stage(req: JobRequest, part: Partition, types: list[NodeType], gpn: int,
               tasks: int) -> tuple[list[NodeType], str | None]:
    kept = [t for t in types if gpn <= t.gpus]
    # GPUs that no node of the partition has are the topology rule's to refuse.
    if kept or gpn > part.most_gpus:
        return kept or types, None
    expr = req.constraint or part.default_constraint
    most = max(t.gpus for t in types)
    return types, (
        f"{req.profile.name}: no node type of partition {part.name} with --constraint {expr} "
        f"has {number(gpn)} GPUs (at most {most}: {listing(part, types)})"
    )


def _cpu_stage(req: JobRequest, part: Partition, types: list[NodeType], gpn: int,
               tasks: int) -> tuple[list[NodeType], str | None]:
    cpt = req.cpus_per_task
    if cpt is None or cpt < 1:
        return types, None
    used = tasks * cpt
    kept = [t for t in types if used <= t.cpus]
    if kept:
        return kept, None
    most = max(t.cpus for t in types)
    return types, (
        f"{req.profile.name}: {tasks} task(s) x {number(cpt)} CPUs = {number(used)} CPUs per "
        f"node, but {part.name} nodes have {most}" + _types_suffix(part, types)
    )


def _mem_stage(req: JobRequest, part: Partition, types: list[NodeType], gpn: int,
               tasks: int) -> tuple[list[NodeType], str | None]:
    try:
        mem_mb = parse_mem_mb(req.mem) if req.mem is not None else 0
    except ValueError:
        return types, None  # the memory rule says what is wrong with it
    kept = [t for t in types if mem_mb <= t.mem_mb]
    if kept or not mem_mb:
        return kept or types, None
    most = max(t.mem_mb for t in types)
    return types, (
        f"{req.profile.name}: --mem {mem_mb} MB is more than a {part.name} node has "
        f"({most} MB)" + _types_suffix(part, types)
    )


def _types_suffix(part: Partition, types: Sequence[NodeType]) -> str:
    """What each node type has, for a refusal on a partition of several types."""
    return f"; its node types: {listing(part, types)}" if len(part.types()) > 1 else ""


def _constraint(req: JobRequest, part: Partition, base: Sequence[NodeType],
                kept: Sequence[NodeType]) -> tuple[str | None, tuple[str, ...]]:
    """The constraint as given (or the default) while every type it selects fits; else the
    features that select just the fitting types (`K|J`)."""
    given = req.constraint or part.default_constraint
    if len(kept) == len(base):
        return given, ()
    names = ", ".join(t.name for t in kept)
    cover = _cover(part, kept)
    if cover is None:
        return given, (
            f"only the {names} nodes of {part.name} fit this job and no feature selects just "
            "them: SLURM places it by its GPUs, CPUs and memory",
        )
    return cover, (f"--constraint {cover} added: only the {names} nodes of {part.name} fit",)


def _cover(part: Partition, kept: Sequence[NodeType]) -> str | None:
    """`A|B` selecting exactly the kept types, from features only kept types carry."""
    all_types = part.types()
    kept_names = {t.name for t in kept}

    def carriers(feature: str) -> set[str]:
        return {t.name for t in all_types if feature in t.features}

    chosen: list[str] = []
    covered: set[str] = set()
    for t in kept:
        if t.name in covered:
            continue
        feature = next((f for f in t.features if carriers(f) <= kept_names), None)
        if feature is None:
            return None
        chosen.append(feature)
        covered |= carriers(feature)
    return "|".join(chosen)


def _node_limit(req: JobRequest, part: Partition, types: Sequence[NodeType],
                constraint: str | None, nodes: int) -> tuple[str, ...]:
    """The tightest node limit `nodes` exceeds, as one answer: the partition's per job, a
    feature's (Raven: 16 nodes per job with gpu-bw), or the nodes that fit."""
    # At a tie the partition's own limit is named: it holds whatever the nodes.
    limits = [*_partition_cap(part), *_constraint_caps(part, constraint),
              *_fitting(part, types, nodes)]
    over = [limit for limit in limits if nodes > limit[0]]
    if not over:
        return ()
    most, why = min(over, key=lambda limit: limit[0])
    return (f"{req.profile.name}: {why}",)


def _partition_cap(part: Partition) -> list[tuple[int, str]]:
    if part.max_nodes is None:
        return []
    return [(part.max_nodes,
             f"partition {part.name} allows at most {part.max_nodes} node(s) per job")]


def _fitting(part: Partition, types: Sequence[NodeType], nodes: int) -> list[tuple[int, str]]:
    counts = [t.nodes for t in types]
    if any(c is None for c in counts):
        return []
    have = sum(c for c in counts if c is not None)
    return [(have, f"{number(nodes)} nodes asked, but partition {part.name} has {have} "
                   f"node(s) that fit ({listing(part, types)})")]


def _constraint_caps(part: Partition, constraint: str | None) -> list[tuple[int, str]]:
    parsed = parse_constraint(constraint) if constraint else None
    if parsed is None or (parsed[0] == "|" and len(parsed[1]) > 1):
        return []
    return [(found.max_nodes, f"only {found.max_nodes} node(s) per job with --constraint "
                              f"{found.name}")
            for found in map(part.constraint, parsed[1])
            if found is not None and found.max_nodes is not None]


