"""A live cluster -> a draft profile: what SLURM knows, and what it cannot know marked for review.

`read_cluster` asks SLURM (through the one client); everything after it is pure: the facts
become profile data, the data becomes YAML that the normal loader reads back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hpctrain.errors import SlurmError
from hpctrain.slurm.inventory import Association, NodeInfo, PartitionInfo, QosInfo
from hpctrain.values.units import format_time

if TYPE_CHECKING:
    from hpctrain.slurm.client import SlurmClient

# The dev cluster's ClusterName (hpctrain.devcluster.topology): its node counts are scaled down.
EMULATED_CLUSTER = "hpctrain-dev"
# What SLURM cannot tell: site habits and policies, and what only a compute node knows.
UNKNOWABLE = (
    ("environment.modules", "the modules jobs load (`module avail` on a login node)"),
    ("nccl", "interfaces and HCAs: `hpctrain profiles probe NAME` asks a compute node"),
    ("shared_node", "how CPUs and memory follow GPUs on shared nodes (site docs)"),
    ("account", "whether --account is required (site docs); your accounts are listed below"),
    ("partitions.*.allowed_gpus_per_node", "GPU counts the site allows per node"),
    ("partitions.*.multinode_full_nodes", "whether multi-node jobs must take whole nodes"),
    ("partitions.*.implicit", "whether the site's scripts leave out --partition"),
    ("partitions.*.default_constraint", "a --constraint every job must carry"),
    ("requeue", "whether the site allows --requeue"),
    ("scratch_dir", "the cluster's scratch file system"),
)


@dataclass(frozen=True)
class ClusterFacts:
    """What the SLURM commands said; qos and associations are None where sacctmgr refused."""

    version: tuple[int, int]
    cluster: str | None
    partitions: list[PartitionInfo]
    nodes: list[NodeInfo]
    qos: list[QosInfo] | None
    associations: list[Association] | None
    user: str
    notes: list[str] = field(default_factory=list)

    @property
    def emulated(self) -> bool:
        """The dev cluster, whose node counts are not the real cluster's."""
        return (self.cluster or "").startswith(EMULATED_CLUSTER)

    def partition(self, name: str) -> PartitionInfo | None:
        return next((p for p in self.partitions if p.name == name), None)

    def accounts(self) -> list[str]:
        return sorted({a.account for a in self.associations or []})


@dataclass(frozen=True)
class Review:
    """A field the draft leaves to a person, and why."""

    field: str
    why: str


@dataclass(frozen=True)
class Draft:
    """A profile drafted from a live cluster, with what a person must review."""

    data: dict[str, Any]
    review: list[Review]
    notes: list[str]
    accounts: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"profile": self.data, "review": [vars(r) for r in self.review],
                "notes": self.notes, "accounts": self.accounts}


def read_cluster(client: SlurmClient, user: str) -> ClusterFacts:
    """Ask the cluster for partitions, nodes, QOS and the user's accounts (about 7 calls)."""
    dialect = client.dialect()
    # An unreadable version: slurm_version() raises with SLURM's own words.
    version = dialect.version or client.slurm_version()
    config = client.config()
    partitions = client.partition_limits()
    nodes = client.node_inventory(dialect)
    notes: list[str] = []
    try:
        qos: list[QosInfo] | None = client.qos_limits()
        assoc: list[Association] | None = client.associations(user)
    except SlurmError as e:
        # Some sites restrict sacctmgr; the partitions and nodes are still worth having.
        qos = assoc = None
        notes.append(f"sacctmgr gave no answer ({e.what.splitlines()[0]}): QOS limits and "
                     "accounts are not known; ask the site for them")
    return ClusterFacts(version, config.get("ClusterName"), partitions, nodes, qos, assoc,
                        user, notes)


def node_types(facts: ClusterFacts, partition: str) -> list[dict[str, Any]]:
    """The partition's nodes grouped by identical shape and features, in SLURM's node order."""
    groups: dict[tuple[Any, ...], list[NodeInfo]] = {}
    for n in facts.nodes:
        if partition in n.partitions:
            key = (n.gpus, n.gpu_type if n.gpus else None, n.cpus, n.mem_mb, n.features)
            groups.setdefault(key, []).append(n)
    types = []
    for (gpus, gpu_type, cpus, mem, features), members in groups.items():
        types.append({"name": "", "gpus": gpus, "cpus": cpus, "mem_mb": mem,
                      "features": list(features), "gpu_type": gpu_type,
                      "nodes": len(members)})
    _name_types(types, partition)
    return types


def _name_types(types: list[dict[str, Any]], partition: str) -> None:
    """A type is named by its first feature no other type here has (Gilbreth's K, I, J)."""
    taken: set[str] = set()
    for i, t in enumerate(types, start=1):
        others = {f for o in types if o is not t for f in o["features"]}
        own = [f for f in t["features"] if f not in others and f not in taken]
        shared = [f for f in t["features"] if f not in taken]
        name = (own or shared or [partition if len(types) == 1 else f"{partition}-{i}"])[0]
        if name in taken:
            name = f"{name}-{i}"
        taken.add(name)
        t["name"] = name


def _partition(facts: ClusterFacts, p: PartitionInfo, review: list[Review]) -> dict[str, Any]:
    types = node_types(facts, p.name)
    where = f"partitions.{p.name}"
    gpu_types = [t["gpu_type"] for t in types if t["gpu_type"]]
    gpu_type = gpu_types[0] if gpu_types else None
    for t in types:
        # Only a type whose GPUs differ from the partition's says its own model.
        if t["gpu_type"] == gpu_type or not t["gpus"]:
            del t["gpu_type"]
    out: dict[str, Any] = {"name": p.name,
                           "description": f"discovered: {p.total_nodes} node(s)"}
    if p.default:
        out["default"] = True
    if gpu_type:
        out["gpu_type"] = gpu_type
    if p.max_time_s is None:
        review.append(Review(f"{where}.max_time", "UNLIMITED on the cluster: 365 days written; "
                                                  "set the longest job you mean to run"))
    out["max_time"] = format_time(p.max_time_s if p.max_time_s is not None else 365 * 86400)
    if p.default_time_s is not None:
        out["default_time"] = format_time(p.default_time_s)
    if p.max_nodes is None:
        review.append(Review(f"{where}.max_nodes", "no MaxNodes on the cluster: the "
                                                   "partition's node count written"))
    out["max_nodes"] = p.max_nodes if p.max_nodes is not None else max(p.total_nodes, 1)
    if p.allow_qos is not None and len(p.allow_qos) == 1:
        out["required_qos"] = p.allow_qos[0]
    elif p.allow_qos:
        review.append(Review(f"{where}.required_qos",
                             f"AllowQos={','.join(p.allow_qos)}: pick the one jobs need"))
    if not types:
        review.append(Review(where, "no node in this partition: shape unknown"))
        return out
    out["node_types"] = types
    return out


def _qos(facts: ClusterFacts, required: Sequence[str]) -> list[dict[str, Any]]:
    known = {q.name: q for q in facts.qos or []}
    names = list(known) + [n for n in required if n not in known]
    out = []
    for name in names:
        q = known.get(name)
        entry: dict[str, Any] = {"name": name}
        if q is not None and q.max_wall_s is not None:
            entry["max_time"] = format_time(q.max_wall_s)
        if q is not None and q.limits:
            entry["description"] = " ".join(f"{k}={v}" for k, v in q.limits.items())
        out.append(entry)
    return out


def draft_profile(facts: ClusterFacts, name: str, when: str = "") -> Draft:
    """The draft profile for `facts`; what SLURM cannot say goes into `review`."""
    review: list[Review] = []
    parts = [_partition(facts, p, review) for p in facts.partitions if p.state != "INACTIVE"]
    gpu_request = "gres" if any(n.gpus and not n.gpu_type for n in facts.nodes) else "gres_typed"
    version = f"{facts.version[0]}.{facts.version[1]:02d}"
    data: dict[str, Any] = {
        "name": name,
        "cluster": facts.cluster or name,
        "description": f"discovered from SLURM {version} on {facts.cluster or '?'}"
                       + (f", {when}" if when else ""),
        "sources": [f"hpctrain profiles discover (SLURM {version}{', ' + when if when else ''})"],
        "gpu_request": gpu_request,
        "partitions": parts,
    }
    required = [p["required_qos"] for p in parts if "required_qos" in p]
    qos = _qos(facts, required)
    if qos:
        data["qos"] = qos
    review.extend(Review(f, why) for f, why in UNKNOWABLE)
    notes = list(facts.notes)
    if facts.emulated:
        notes.append("this is hpctrain's dev cluster: node counts are the emulation's, not the "
                     "real cluster's")
    return Draft(data, review, notes, facts.accounts())


def draft_yaml(draft: Draft) -> str:
    """The draft as a profile file: review items and notes as comments, then the data."""
    import yaml

    lines = ["# Draft profile written by `hpctrain profiles discover`.",
             "# Fields SLURM cannot know, left at hpctrain's defaults until you set them:"]
    lines += [f"#   REVIEW {r.field}: {r.why}" for r in draft.review]
    if draft.accounts:
        lines.append(f"# Your accounts here: {', '.join(draft.accounts)} "
                     "(`default_account:` picks one)")
    lines += [f"# NOTE {n}" for n in draft.notes]
    body = yaml.safe_dump(draft.data, sort_keys=False, allow_unicode=True, width=100)
    return "\n".join(lines) + "\n" + body
