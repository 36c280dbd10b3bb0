"""`hpctrain free` on the dev cluster (issue 42): right while jobs hold some GPUs, and the
candidates of a request ranked by the start SLURM predicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DevClusterHandle
from tests.jobs.test_jobs_cluster import Cli

pytestmark = [pytest.mark.cluster]


def _hold_one_gpu(cli: Cli, node: str) -> str:
    job = cli.submit("--gpus-per-node", "1", "--time", "5", "--sbatch-arg", f"--nodelist={node}",
                     "--", "sleep", "300")
    return str(job["job_id"])


def test_free_gpus_per_partition_and_the_request_that_starts_first(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    cli = Cli(devcluster, tmp_path)
    held = [_hold_one_gpu(cli, n) for n in ("node1", "node2")]
    try:
        for job_id in held:
            cli.wait(job_id, lambda j: j["state"] == "RUNNING", 120)
        got = json.loads(cli.ok("free", "--profile", "local", "--first-of", "1x2,2x1",
                                "--time", "10", "--json").stdout)
        (view,) = got["profiles"]
        (debug,) = view["partitions"]
        assert (debug["gpus"], debug["gpus_used"], debug["gpus_free"]) == (4, 2, 2), debug
        assert debug["idle_nodes"] == 0
        # One GPU free on each node: 2x1 starts now, 1x2 only when a sleeper ends.
        first, second = got["candidates"]
        assert (first["topology"], first["check"]["starts"]) == ("2x1", "now"), got
        assert second["topology"] == "1x2" and second["check"]["wait_s"] > 0, got
        text = cli.ok("free", "-P", "local", "--nodes", "2", "--gpus-per-node", "1").stdout
        assert "GPUS FREE" in text and "2/4" in text and "now on node[1-2]" in text, text
    finally:
        cli.ok("cancel", *held)

