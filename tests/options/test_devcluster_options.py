"""`devcluster up --profile/-P --nodes/-N --replace --json` and `devcluster down --json` on the
shared dev cluster; each test leaves it running (the session's switch repairs it in `finally`,
and brings `local` with 2 nodes back for the next test that asks for `devcluster`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from hpctrain.slurm.client import SlurmClient
from tests.options.conftest import TWO_PARTITIONS, running

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = pytest.mark.cluster
Switch = Callable[..., "DevClusterHandle"]


def _partitions(slurm_conf: str) -> dict[str, set[str]]:
    """Partition -> its nodes, as sinfo of the running cluster lists them (one row per node)."""
    out = SlurmClient.local(slurm_conf).run(
        ["sinfo", "--noheader", "--Node", "--format=%P|%N"]).stdout
    found: dict[str, set[str]] = {}
    for line in out.split():
        part, node = line.split("|")
        found.setdefault(part.rstrip("*"), set()).add(node)
    return found


def test_up_switches_profile_and_size_only_with_replace(devcluster_with: Switch) -> None:
    local = devcluster_with("local")
    try:
        refused = local.cli("devcluster", "up", "--profile", str(TWO_PARTITIONS), "--nodes", "1",
                            "--json")
        assert refused.returncode == 1 and "--replace" in refused.stderr, refused.stderr
        # --json: the refusal as the one error object on stdout.
        assert "--replace" in str(json.loads(refused.stdout)["error"]["fix"]) + str(
            json.loads(refused.stdout)["error"]["what"])
        assert {p: len(n) for p, n in _partitions(str(local.slurm_conf)).items()} == {
            "debug": 2}
        res = local.cli("devcluster", "up", "-P", str(TWO_PARTITIONS), "-N", "1", "--replace",
                        "--json", timeout_s=300)
        assert res.returncode == 0, res.stderr
        data = json.loads(res.stdout)
        assert data["profile"] == "optb-two" and data["nodes_per_partition"] == 1
        assert data["already_running"] is False
        # A switch says from what, not "repaired" (munged, MariaDB and slurmdbd lived on).
        assert data["replaced"] == {"profile": "local", "nodes_per_partition": 2}
        parts = _partitions(data["slurm_conf"])
        # One node per partition (per node shape), each partition its own: --nodes 1.
        assert sorted(parts) == ["batch", "debug"], parts
        assert [len(nodes) for nodes in parts.values()] == [1, 1]
        assert parts["batch"] != parts["debug"]
        assert set(data["node_names"]) == parts["batch"] | parts["debug"]
    finally:
        devcluster_with(str(TWO_PARTITIONS), nodes=1)


def test_down_json_names_each_daemon_it_stopped(two_partitions: DevClusterHandle,
                                                devcluster_with: Switch) -> None:
    dc = two_partitions
    try:
        status = dc.cli("devcluster", "status", "--json")
        assert status.returncode == 0, status.stderr
        alive = {d["pid"]: d["name"] for d in json.loads(status.stdout)["daemons"] if d["alive"]}
        assert len(alive) >= 5, alive  # munged, mysqld, slurmdbd, slurmctld, a slurmd per node
        res = dc.cli("devcluster", "down", "--json", timeout_s=180)
        assert res.returncode == 0, res.stderr
        stopped = {s["pid"]: s["name"] for s in json.loads(res.stdout)}
        assert stopped == alive
        assert [pid for pid in stopped if running(pid)] == []
        after = dc.cli("devcluster", "status", "--json")
        assert after.returncode == 1 and json.loads(after.stdout)["running"] is False
    finally:
        devcluster_with(str(TWO_PARTITIONS), nodes=1)
