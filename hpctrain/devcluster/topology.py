"""Profile -> the emulated cluster's node groups, partitions, QOS and accounts (pure)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from hpctrain.devcluster.layout import MAX_PREFIX, Ports
from hpctrain.profiles.model import Partition, Profile
from hpctrain.units import parse_time_seconds

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

Shape = tuple[int, int, str | None, int]


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of one shape, shared by every partition of the profile with that shape."""

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
    """One partition of the profile, on the nodes of its shape."""

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
    """Group the profile's partitions by node shape and give each group its own nodes."""
    if nodes_per_group < 1:
        raise ValueError("nodes per partition must be at least 1")
    ports = ports or Ports()
    shapes = _partitions_by_shape(profile.partitions)
    if len(shapes) * nodes_per_group > MAX_SLURMDS:
        raise ValueError(
            f"profile {profile.name} has {len(shapes)} node shapes; {nodes_per_group} nodes each "
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


def _shape(p: Partition) -> Shape:
    return (p.cpus_per_node, p.mem_per_node_mb, p.gpu_type if p.gpus_per_node else None,
            p.gpus_per_node)


def _partitions_by_shape(partitions: Sequence[Partition]) -> dict[Shape, list[Partition]]:
    shapes: dict[Shape, list[Partition]] = {}
    for p in partitions:
        shapes.setdefault(_shape(p), []).append(p)
    return shapes


def _node_groups(shapes: dict[Shape, list[Partition]], nodes_per_group: int,
                 first_port: int) -> tuple[NodeGroup, ...]:
    groups: list[NodeGroup] = []
    used: set[str] = set()
    for i, (shape, parts) in enumerate(shapes.items(), start=1):
        names = [p.name for p in parts]
        prefix = "node" if len(shapes) == 1 else _hostname_prefix(_stem(names))
        if prefix in used:
            prefix = f"{prefix}g{i}"
        used.add(prefix)
        port = first_port + (i - 1) * nodes_per_group
        cpus, mem, gpu_type, gpus = shape
        groups.append(NodeGroup(
            prefix=prefix, partitions=tuple(names), cpus=cpus, mem_mb=mem, gpu_type=gpu_type,
            gpus=gpus, features=_features(parts),
            nodes=tuple(f"{prefix}{k}" for k in range(1, nodes_per_group + 1)),
            ports=tuple(range(port, port + nodes_per_group)),
        ))
    return tuple(groups)


def _features(parts: Sequence[Partition]) -> tuple[str, ...]:
    """Every constraint name of the shape's partitions, in order, once."""
    features: list[str] = []
    for p in parts:
        for f in [p.default_constraint, *(c.name for c in p.constraints)]:
            if f and f not in features:
                features.append(f)
    return tuple(features)


def _partition_specs(profile: Profile, groups: Sequence[NodeGroup]
                     ) -> tuple[PartitionSpec, ...]:
    default = profile.default_partition.name
    by_partition = {name: g for g in groups for name in g.partitions}
    return tuple(
        PartitionSpec(
            name=p.name,
            nodes=by_partition[p.name].nodes,
            default=p.name == default,
            max_time_s=p.max_seconds,
            default_time_s=_seconds(p.default_time),
            max_nodes=p.max_nodes,
            # Like real sites: a job without --mem gets its CPUs' share, not the whole node.
            def_mem_per_cpu=max(1, p.mem_per_node_mb // p.cpus_per_node),
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
