"""Profile -> the emulated cluster's node groups (one per node type), partitions, QOS and
accounts (pure)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from hpctrain.devcluster.layout import MAX_PREFIX, Ports
from hpctrain.profiles.model import NodeType, Partition, Profile
from hpctrain.values.units import parse_time_seconds

# Rendered scripts test $SLURM_CLUSTER_NAME = hpctrain-dev* to skip module loads.
CLUSTER_NAME = "hpctrain-dev"
DEFAULT_NODES = 2
# 2-core machines: more slurmds than this make start-up slow and the scheduler sluggish.
MAX_SLURMDS = 24
DEFAULT_ACCOUNT = "hpctrain-dev"
# Accounts every emulated cluster carries, so tests can pass an --account the way users must
# on Gilbreth and Marvin (ag_<inst>_<pi>); anything else is refused like on a real cluster.
ACCOUNTS = (DEFAULT_ACCOUNT, "hpctrain-test", "ag_hpctrain_test")
_HOSTNAME_CHARS = re.compile(r"[^a-z0-9-]+")

# cpus, memory, GPU type, GPUs, features: node types alike in all of them share nodes (Gilbreth's
# J nodes serve both a100-80gb and training; Raven's gpudev runs on the plain gpu nodes).
Shape = tuple[int, int, str | None, int, tuple[str, ...]]


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of one node type (by shape and features), shared by the partitions that have it."""

    prefix: str
    partitions: tuple[str, ...]
    cpus: int
    mem_mb: int
    gpu_type: str | None
    gpus: int
    features: tuple[str, ...]
    nodes: tuple[str, ...]
    ports: tuple[int, ...]

    @property
    def gres(self) -> str | None:
        """slurm.conf's Gres= value for these nodes; None without GPUs."""
        if self.gpus <= 0:
            return None
        return f"gpu:{self.gpu_type}:{self.gpus}" if self.gpu_type else f"gpu:{self.gpus}"


@dataclass(frozen=True)
class PartitionSpec:
    """One partition of the profile, on the nodes of its node types."""

    name: str
    nodes: tuple[str, ...]
    default: bool
    max_time_s: int
    default_time_s: int | None
    max_nodes: int | None
    def_mem_per_cpu: int
    allow_qos: str | None


@dataclass(frozen=True)
class QosSpec:
    """A QOS with its wall-time limit (None: unlimited)."""

    name: str
    max_wall_s: int | None


@dataclass(frozen=True)
class ClusterPlan:
    """What the emulated cluster looks like: node groups, partitions, QOS, accounts."""

    profile: str
    nodes_per_group: int
    groups: tuple[NodeGroup, ...]
    partitions: tuple[PartitionSpec, ...]
    qos: tuple[QosSpec, ...]
    accounts: tuple[str, ...]
    ports: Ports = field(default_factory=Ports)

    @property
    def node_names(self) -> list[str]:
        """Every node, group by group."""
        return [n for g in self.groups for n in g.nodes]

    def node_ports(self) -> dict[str, int]:
        """Each node's slurmd port."""
        return {n: p for g in self.groups for n, p in zip(g.nodes, g.ports, strict=True)}


def plan_cluster(profile: Profile, nodes_per_group: int = DEFAULT_NODES,
                 ports: Ports | None = None) -> ClusterPlan:
    """Group the profile's node types by shape and features; give each group its own nodes."""
    if nodes_per_group < 1:
        raise ValueError("nodes per partition must be at least 1")
    ports = ports or Ports()
    shapes = _types_by_shape(profile.partitions)
    if len(shapes) * nodes_per_group > MAX_SLURMDS:
        raise ValueError(
            f"profile {profile.name} has {len(shapes)} node types; {nodes_per_group} nodes each "
            f"would start {len(shapes) * nodes_per_group} slurmd (at most {MAX_SLURMDS})"
        )
    groups = _node_groups(shapes, nodes_per_group, ports.slurmd_base)
    return ClusterPlan(
        profile=profile.name,
        nodes_per_group=nodes_per_group,
        groups=groups,
        partitions=_partition_specs(profile, groups),
        qos=tuple(QosSpec(q.name, _seconds(q.max_time)) for q in profile.qos),
        accounts=_accounts(profile),
        ports=ports,
    )


def _shape(p: Partition, t: NodeType) -> Shape:
    return (t.cpus, t.mem_mb, p.gpu_type_of(t), t.gpus, tuple(t.features))


@dataclass
class _Members:
    """The partitions that have one shape, and the names their node types go by."""

    partitions: list[str] = field(default_factory=list)
    # Type names other than the partition's own (a flat partition's one implicit type).
    type_names: list[str] = field(default_factory=list)


def _types_by_shape(partitions: Sequence[Partition]) -> dict[Shape, _Members]:
    shapes: dict[Shape, _Members] = {}
    for p in partitions:
        for t in p.types():
            members = shapes.setdefault(_shape(p, t), _Members())
            if p.name not in members.partitions:
                members.partitions.append(p.name)
            if p.node_types and t.name not in members.type_names:
                members.type_names.append(t.name)
    return shapes


def _node_groups(shapes: dict[Shape, _Members], nodes_per_group: int,
                 first_port: int) -> tuple[NodeGroup, ...]:
    groups: list[NodeGroup] = []
    used: set[str] = set()
    for i, (shape, members) in enumerate(shapes.items(), start=1):
        names = members.partitions
        # Named types give their hosts their name (k1, k2 for Gilbreth's K nodes).
        stem = members.type_names[0] if members.type_names else _stem(names)
        prefix = "node" if len(shapes) == 1 else _hostname_prefix(stem)
        if prefix in used:
            prefix = f"{prefix}g{i}"
        used.add(prefix)
        port = first_port + (i - 1) * nodes_per_group
        cpus, mem, gpu_type, gpus, features = shape
        groups.append(NodeGroup(
            prefix=prefix, partitions=tuple(names), cpus=cpus, mem_mb=mem,
            gpu_type=gpu_type if gpus else None, gpus=gpus, features=features,
            nodes=tuple(f"{prefix}{k}" for k in range(1, nodes_per_group + 1)),
            ports=tuple(range(port, port + nodes_per_group)),
        ))
    return tuple(groups)


def _partition_specs(profile: Profile, groups: Sequence[NodeGroup]
                     ) -> tuple[PartitionSpec, ...]:
    default = profile.default_partition.name
    return tuple(
        PartitionSpec(
            name=p.name,
            nodes=tuple(n for g in groups if p.name in g.partitions for n in g.nodes),
            default=p.name == default,
            max_time_s=p.max_seconds,
            default_time_s=_seconds(p.default_time),
            max_nodes=p.max_nodes,
            # Like real sites: a job without --mem gets its CPUs' share, not the whole node
            # (of the type with the least memory per CPU, so it fits every type).
            def_mem_per_cpu=max(1, min(t.mem_mb // t.cpus for t in p.types())),
            allow_qos=p.required_qos,
        )
        for p in profile.partitions
    )


def _accounts(profile: Profile) -> tuple[str, ...]:
    accounts = list(ACCOUNTS)
    if profile.default_account and profile.default_account not in accounts:
        accounts.append(profile.default_account)
    return tuple(accounts)


def _stem(names: Sequence[str]) -> str:
    """The shared part of partition names before their last separator (sgpu_short -> sgpu)."""
    if len(names) == 1:
        return names[0]
    common = names[0]
    for n in names[1:]:
        while not n.startswith(common):
            common = common[:-1]
    cut = max(common.rfind(c) for c in "_-.")
    return common[:cut] if cut > 0 else common


def _hostname_prefix(stem: str) -> str:
    prefix = _HOSTNAME_CHARS.sub("-", stem.lower()).strip("-")
    if not prefix or not prefix[0].isalpha():
        prefix = "n" + prefix
    # Node names end up twice in slurmstepd's socket path, which must stay short.
    prefix = prefix[:MAX_PREFIX].rstrip("-")
    # A trailing digit would run into the node index (a30 + 1 -> a301), so separate them.
    if prefix[-1].isdigit():
        prefix += "n"
    return prefix


def _seconds(text: str | None) -> int | None:
    return None if text is None else parse_time_seconds(text)
