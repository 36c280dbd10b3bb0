"""`hpctrain free` on the dev cluster (issue 42): right while jobs hold some GPUs, and the
candidates of a request ranked by the start SLURM predicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DevClusterHandle
from tests.jobs.test_jobs_cluster import Cli

pytestmark = [pytest.mark.cluster]


def _hold_one_gpu(cli: Cli, node: str) -> str:
    job = cli.submit("--gpus-per-node", "1", "--time", "5", "--sbatch-arg", f"--nodelist={node}",
                     "--", "sleep", "300")
    return str(job["job_id"])


def _usage_of_the_running_jobs(cli: Cli, seen: dict[str, Any]) -> None:
    """The two sleepers run in the profile's account: they hold GPU-hours and have used some;
    the dev cluster orders its queue first come, first served (no fair share)."""
    assert seen["held_gpu_hours"] > 0 and seen["accounting_unavailable"] is None, seen
    dev = {a["account"]: a for a in seen["accounts"]}["hpctrain-dev"]
    assert dev["gpu_hours"] >= dev["your_gpu_hours"] > 0, seen
    assert seen["fair_share_orders_queue"] is False and dev["fair_share"] is None, seen
    checked = json.loads(cli.ok("render", "-P", "local", "--check", "--account", "hpctrain-dev",
                                "--json").stdout)
    assert [a["account"] for a in checked["usage"]["accounts"]] == ["hpctrain-dev"], checked
    # Every kind's dry run shows it too (cli/display.py), for the account it would charge.
    for dry in (("submit", "--account", "hpctrain-dev"),
                ("sweep", "--account", "hpctrain-dev", "--grid", "seed=1,2")):
        shown = json.loads(cli.ok(*dry, "-P", "local", "--dry-run", "--json").stdout)
        assert [a["account"] for a in shown["usage"]["accounts"]] == ["hpctrain-dev"], shown
        assert shown["usage"]["held_gpu_hours"] > 0, shown
    week = cli.ok("free", "-P", "local", "--days", "7").stdout
    assert "GPU-H (7 D)" in week and "fair share does not order this queue" in week, week


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
        _usage_of_the_running_jobs(cli, view["usage"])
    finally:
        cli.ok("cancel", *held)



def test_free_says_why_slurm_expects_a_later_start_on_idle_nodes(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    cli = Cli(devcluster, tmp_path)
    # A 1-node job of 10 min that may start only in an hour: it takes no node, yet
    # `sbatch --test-only` adds its time limit (spread over the partition's 8 CPUs): 5 min.
    later = cli.ok("submit", "-P", "local", "--gpus-per-node", "1", "--time", "10",
                   "--sbatch-arg=--begin=now+1hour", "--json", "--", "true")
    job_id = str(json.loads(later.stdout)["job_id"])
    try:
        text = cli.ok("free", "-P", "local", "-N", "2", "--time", "30").stdout
        assert "2x2       in 5 min" in text, text
        assert ("2 of debug's nodes are idle now; SLURM's estimate adds the time limits of the "
                "1 job(s) waiting in debug") in text, text
    finally:
        cli.ok("cancel", job_id)
