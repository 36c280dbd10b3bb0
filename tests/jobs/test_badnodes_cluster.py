"""Quarantined nodes on the dev cluster (issue 41): a submit keeps away from them and says so;
a job that needs every node says why it ignores the quarantine; --ignore-quarantine uses
them. The evidence that puts a node there is tests/monitor/test_stall_cluster.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpctrain.history import History, NodeSuspect
from hpctrain.slurm.client import SlurmClient
from tests.conftest import DevClusterHandle
from tests.jobs.test_jobs_cluster import Cli

pytestmark = [pytest.mark.cluster]


def test_a_quarantined_node_is_left_out_unless_the_job_needs_it(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    cli = Cli(devcluster, tmp_path)
    name = SlurmClient.local(str(devcluster.slurm_conf)).cluster_name()
    assert name
    History(cli.db).add_suspects([NodeSuspect(
        cluster=name, node="node1", reason="node_failure", evidence="test", job_id="1")])

    one = cli.submit("--gpus-per-node", "1", "--", "hostname")
    assert "node1" in " ".join(one["plan"]["exclude"]), one["plan"]
    ended = cli.wait(str(one["job_id"]), lambda j: j["terminal"], 120)
    assert ended["state"] == "COMPLETED" and ended["node_list"] == "node2", ended

    both = cli.submit("--nodes", "2", "--gpus-per-node", "1", "--", "hostname")
    assert both["plan"]["exclude"] == []
    assert any("not excluded: the job needs 2" in n for n in both["plan"]["notes"])

    forced = json.loads(cli.ok("submit", "--profile", "local", "--time", "2", "--json",
                               "--gpus-per-node", "1", "--ignore-quarantine", "--",
                               "hostname").stdout)
    assert forced["plan"]["exclude"] == []
    for job in (both, forced):
        cli.wait(str(job["job_id"]), lambda j: j["terminal"], 120)


def test_retries_that_no_retry_could_honour_are_refused(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    """Issue 51: the dev cluster has 2 nodes; a 2-node job's retry without its stalled node
    is one sbatch refuses, so submit refuses --retries for it and says why; 1 node is fine."""
    cli = Cli(devcluster, tmp_path)
    both = cli("submit", "--profile", "local", "--time", "2", "--nodes", "2",
               "--gpus-per-node", "1", "--retries", "1", "--", "hostname")
    assert both.returncode == 1, both.stdout
    assert ("--retries 1: a retry runs without the stalled node, but the job needs 2 of "
            "partition debug's 2 node(s), so SLURM would refuse every retry") in both.stderr
    assert "--nodes 1" in both.stderr and "Traceback" not in both.stderr
    one = cli.submit("--nodes", "1", "--gpus-per-node", "1", "--retries", "1", "--", "hostname")
    assert one["plan"]["retries"] == 1
    ended = cli.wait(str(one["job_id"]), lambda j: j["terminal"], 120)
    assert ended["state"] == "COMPLETED", ended
