"""Cluster facts built from the SLURM output recorded under recorded/slurm-*/<profile>/."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from hpctrain.profiles.discover import ClusterFacts, read_cluster
from hpctrain.profiles.model import Partition, Profile
from hpctrain.slurm.runner import Result
from hpctrain.slurm.versions import dialect_for
from hpctrain.values.units import parse_time_seconds
from tests.jobs.helpers import ReplayClient
from tests.recorded import SLURM

# The set recorded from the dev cluster's SLURM (see its MANIFEST.json for each file's origin).
RECORDED = Path(__file__).parent / "recorded" / SLURM
# The user the recordings' sacctmgr answers are about (record.py ran as root).
USER = "root"


# Every SLURM the profiles were recorded on.
SETS = ("slurm-22.05", "slurm-24.11")


def recording(profile: str, name: str, slurm: str = SLURM) -> dict[str, Any]:
    path = RECORDED.parent / slurm / profile / f"{name}.json"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def replay(profile: str, *, accounting: bool = True, slurm: str = SLURM) -> ReplayClient:
    """A client answering with `profile`'s recordings, each only to its own command line."""
    def result(name: str) -> Result:
        d = recording(profile, name, slurm)
        return Result(tuple(d["argv"]), d["returncode"], d["stdout"], d["stderr"])

    sacctmgr = [result("qos"), result("assoc")] if accounting else [result("sacctmgr_off")]
    answers: dict[str, list[Result]] = {"sinfo": [], "scontrol": [], "sacctmgr": sacctmgr}
    for name in ("sinfo_version", "config", "partitions", "nodes", "nodes_json"):
        res = result(name)
        answers[res.argv[0]].append(res)
    return ReplayClient(slurm=slurm, answers=dict(answers))


def recorded_facts(profile: str, *, json_nodes: bool = True, accounting: bool = True,
                   slurm: str = SLURM) -> ClusterFacts:
    """What `read_cluster` makes of the recorded output (the JSON or the text node path)."""
    client = replay(profile, accounting=accounting, slurm=slurm)
    facts = read_cluster(client, USER)
    if not json_nodes:
        # The path of a SLURM older than sinfo --json: `scontrol -o show node`.
        facts = dataclasses.replace(facts, nodes=client.node_inventory(dialect_for(None, {})))
    return facts


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
