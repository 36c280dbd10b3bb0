"""Cluster facts built from the SLURM output recorded under recorded/<profile>/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hpctrain.profiles.discover import ClusterFacts
from hpctrain.profiles.model import Partition, Profile
from hpctrain.slurm import inventory as inv
from hpctrain.units import parse_time_seconds

RECORDED = Path(__file__).parent / "recorded"


def recording(profile: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / profile / f"{name}.json").read_text())
    return data


def recorded_facts(profile: str, *, json_nodes: bool = True,
                   accounting: bool = True) -> ClusterFacts:
    """What `read_cluster` would make of the recorded output (the JSON or the text node path)."""
    out = {n: recording(profile, n)["stdout"] for n in (
        "sinfo_version", "config", "partitions", "nodes", "sinfo_json", "qos", "assoc")}
    nodes = inv.parse_nodes_json(out["sinfo_json"]) if json_nodes else inv.parse_nodes_text(
        out["nodes"])
    assert nodes is not None
    return ClusterFacts(
        version=inv.parse_version(out["sinfo_version"]),
        cluster=inv.parse_config(out["config"]).get("ClusterName"),
        partitions=inv.parse_partitions_text(out["partitions"]),
        nodes=nodes,
        qos=inv.parse_qos(out["qos"]) if accounting else None,
        associations=inv.parse_associations(out["assoc"]) if accounting else None,
        user="root",
    )


def _types(p: Partition, named: bool) -> list[tuple[Any, ...]]:
    # Names are compared where the profile names its types by feature (a discovered type is
    # named by a feature); a flat partition's one type is named after the partition.
    return sorted((t.gpus, t.cpus, t.mem_mb, tuple(sorted(t.features)), p.gpu_type_of(t),
                   t.name if named and t.features else "") for t in p.types())


def _seconds(text: str | None) -> int | None:
    return None if text is None else parse_time_seconds(text)


def assert_same_profile(want: Profile, got: Profile) -> None:
    """Partitions, node types, limits and QOS of `want` are in `got` (node counts aside)."""
    assert got.default_partition.name == want.default_partition.name
    for p in want.partitions:
        d = got.partition(p.name)
        assert d is not None, f"{p.name} not discovered"
        assert (d.max_seconds, _seconds(d.default_time), d.max_nodes, d.required_qos) == (
            p.max_seconds, _seconds(p.default_time), p.max_nodes, p.required_qos), p.name
        named = bool(p.node_types)
        assert _types(d, named) == _types(p, named), p.name
        assert set(d.features()) == set(p.features()), p.name
    for q in want.qos:
        found = got.qos_named(q.name)
        assert found is not None and _seconds(found.max_time) == _seconds(q.max_time), q.name
