"""A profile held against a live cluster: each difference with its fix, fatal or not (pure).

Fatal differences would make jobs fail: a missing partition, QOS, account or feature, or fewer
GPUs, cores, memory, time or nodes than the profile promises. The rest (the cluster allows more
than the profile says) only cost what the profile leaves unused. Only what the profile says is
checked: a cluster may have partitions and QOS a profile does not use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hpctrain.profiles.discover import ClusterFacts, node_types
from hpctrain.profiles.model import NodeType, Partition, Profile
from hpctrain.slurm.inventory import PartitionInfo
from hpctrain.values.units import format_time, parse_time_seconds


@dataclass(frozen=True)
class Difference:
    """One way a profile differs from the cluster it describes."""

    where: str
    message: str
    fix: str
    fatal: bool

    def as_dict(self) -> dict[str, Any]:
        return vars(self)


@dataclass
class CheckReport:
    """What `profiles check` found: the differences, fatal or not, and notes."""

    profile: str
    cluster: str | None
    differences: list[Difference] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def fatal(self) -> bool:
        return any(d.fatal for d in self.differences)

    def add(self, where: str, message: str, fix: str, fatal: bool) -> None:
        self.differences.append(Difference(where, message, fix, fatal))

    def as_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "cluster": self.cluster, "fatal": self.fatal,
                "differences": [d.as_dict() for d in self.differences], "notes": self.notes}


def check_profile(profile: Profile, facts: ClusterFacts) -> CheckReport:
    """Every way `profile` and the cluster in `facts` disagree."""
    report = CheckReport(profile.name, facts.cluster, notes=list(facts.notes))
    if facts.emulated:
        report.notes.append("the dev cluster emulates the profile with fewer nodes: node "
                            "counts are not compared")
    elif facts.cluster and facts.cluster != profile.cluster:
        report.add(profile.name, f"cluster {profile.cluster!r} in the profile, this is "
                   f"{facts.cluster!r}", "run the check on the profile's cluster, or fix "
                   "`cluster:`", fatal=False)
    for p in profile.partitions:
        live = facts.partition(p.name)
        if live is None:
            report.add(f"{profile.name} {p.name}", "partition missing on the cluster",
                       f"remove it or rename it (`sinfo -s` lists them: "
                       f"{', '.join(x.name for x in facts.partitions)})", fatal=True)
            continue
        _limits(report, profile, p, live, facts.emulated)
        _types(report, profile, p, facts)
    _qos(report, profile, facts)
    _account(report, profile, facts)
    return report


def _limits(report: CheckReport, profile: Profile, p: Partition, live: PartitionInfo,
            emulated: bool) -> None:
    where = f"{profile.name} {p.name}"
    if live.max_time_s is not None and live.max_time_s != p.max_seconds:
        report.add(where, f"max_time {p.max_time} in the profile, "
                   f"{format_time(live.max_time_s)} on the cluster",
                   f"set `max_time: \"{format_time(live.max_time_s)}\"`",
                   fatal=live.max_time_s < p.max_seconds)
    default_s = parse_time_seconds(p.default_time) if p.default_time else None
    if default_s is not None and live.default_time_s not in (None, default_s):
        report.add(where, f"default_time {p.default_time} in the profile, "
                   f"{format_time(live.default_time_s or 0)} on the cluster",
                   "hpctrain always passes --time: only the profile's value counts", False)
    most = live.max_nodes
    if not emulated and (most is None or live.total_nodes < most):
        # Without MaxNodes (or above the node count) the partition's size is the limit.
        most = live.total_nodes
    if p.max_nodes is not None and most is not None and most != p.max_nodes:
        report.add(where, f"max_nodes {p.max_nodes} in the profile, {most} on the cluster",
                   f"set `max_nodes: {most}`", fatal=most < p.max_nodes)
    if p.required_qos and live.allow_qos is not None and p.required_qos not in live.allow_qos:
        report.add(where, f"required_qos {p.required_qos} is not allowed here "
                   f"(AllowQos={','.join(live.allow_qos)})",
                   f"set `required_qos: {live.allow_qos[0]}`", fatal=True)
    elif not p.required_qos and live.allow_qos is not None and "normal" not in live.allow_qos:
        report.add(where, f"the partition only takes QOS {','.join(live.allow_qos)}",
                   f"set `required_qos: {live.allow_qos[0]}`", fatal=True)


def _types(report: CheckReport, profile: Profile, p: Partition, facts: ClusterFacts) -> None:
    live = node_types(facts, p.name)
    where = f"{profile.name} {p.name}"
    if not live:
        report.add(where, "no node in the partition", "ask the site; jobs here would pend",
                   fatal=True)
        return
    for t in p.types():
        match = _match(t, live)
        if match is None:
            wanted = ",".join(t.features) or "any"
            report.add(f"{where} {t.name}", f"no nodes with features {wanted}",
                       "`sinfo -o '%P %f'` lists the features; fix `features:`", fatal=True)
            continue
        _shape(report, f"{where} {t.name}", t, p.gpu_type_of(t), match, facts.emulated)
    features = {f for x in live for f in x["features"]}
    for f in p.features():
        if f not in features:
            report.add(where, f"feature {f!r} is on no node of the partition",
                       f"drop constraint {f!r} (the cluster has: "
                       f"{', '.join(sorted(features)) or 'none'})", fatal=True)


def _match(t: NodeType, live: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The cluster's node group that the profile's type stands for."""
    fits = [x for x in live if set(t.features) <= set(x["features"])]
    if not fits:
        return None
    same = [x for x in fits if set(x["features"]) == set(t.features)]
    if len(same) > 1:
        # Nodes with the type's features but several shapes (a little less memory on some):
        # a job may land on any of them, so the smallest values are what the type can promise.
        return {**same[0], "gpus": min(x["gpus"] for x in same),
                "cpus": min(x["cpus"] for x in same), "mem_mb": min(x["mem_mb"] for x in same),
                "nodes": sum(x["nodes"] for x in same)}
    named = [x for x in fits if x["name"] == t.name]
    shaped = [x for x in fits if (x["gpus"], x["cpus"], x["mem_mb"]) == (t.gpus, t.cpus, t.mem_mb)]
    return (same or named or shaped or fits)[0]


def _shape(report: CheckReport, where: str, t: NodeType, gpu_type: str | None,
           live: dict[str, Any], emulated: bool) -> None:
    for attr, label, fix in (("gpus", "GPUs", "gpus"), ("cpus", "cores", "cpus"),
                             ("mem_mb", "MB usable memory", "mem_mb")):
        ours, theirs = getattr(t, attr), live[attr]
        if ours != theirs:
            report.add(where, f"{ours} {label} per node in the profile, {theirs} on the cluster",
                       f"set `{fix}: {theirs}`", fatal=theirs < ours)
    live_type = live.get("gpu_type")
    if t.gpus and gpu_type and live_type and gpu_type != live_type:
        report.add(where, f"GPU type {gpu_type} in the profile, {live_type} on the cluster",
                   f"set `gpu_type: {live_type}` (--gres=gpu:{gpu_type}:N would be refused)",
                   fatal=True)
    if not emulated and t.nodes is not None and t.nodes != live["nodes"]:
        report.add(where, f"{t.nodes} nodes in the profile, {live['nodes']} on the cluster",
                   f"set `nodes: {live['nodes']}`", fatal=False)


def _qos(report: CheckReport, profile: Profile, facts: ClusterFacts) -> None:
    if facts.qos is None:
        if profile.qos:
            report.notes.append("QOS not checked: sacctmgr gave no answer")
        return
    live = {q.name: q for q in facts.qos}
    for q in profile.qos:
        where = f"{profile.name} qos {q.name}"
        lq = live.get(q.name)
        if lq is None:
            report.add(where, "QOS missing on the cluster",
                       f"remove it (the cluster has: {', '.join(sorted(live))})", fatal=True)
            continue
        ours = parse_time_seconds(q.max_time) if q.max_time else None
        if lq.max_wall_s is not None and ours != lq.max_wall_s:
            shown = q.max_time or "none"
            report.add(where, f"max_time {shown} in the profile, "
                       f"{format_time(lq.max_wall_s)} on the cluster",
                       f"set `max_time: \"{format_time(lq.max_wall_s)}\"`",
                       fatal=ours is None or lq.max_wall_s < ours)


def _account(report: CheckReport, profile: Profile, facts: ClusterFacts) -> None:
    if not profile.default_account:
        return
    if facts.associations is None:
        report.notes.append("default_account not checked: sacctmgr gave no answer")
        return
    accounts = facts.accounts()
    if profile.default_account not in accounts:
        report.add(f"{profile.name} default_account",
                   f"{facts.user} may not use account {profile.default_account!r}",
                   f"use one of: {', '.join(accounts) or 'none'}", fatal=True)
