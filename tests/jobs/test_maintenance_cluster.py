"""Maintenance windows on the dev cluster (issue 42): with a maintenance reservation 30 minutes
ahead (made with scontrol, as an admin would), a 2-hour submit is refused before the queue with
a fix that, applied, is accepted and chains; a 10-minute submit is accepted; and `why` of a job
that SLURM already keeps waiting for the window names the window, its end and the fix."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import DevClusterHandle
from tests.jobs.test_jobs_cluster import Cli
from tests.waits import wait_for

pytestmark = [pytest.mark.cluster]

NAME = "hpctrain-test-maint"


@contextlib.contextmanager
def maintenance_ahead(cluster: DevClusterHandle, minutes: int) -> Iterator[None]:
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + minutes * 60))
    client = cluster.client()
    client.run(["scontrol", "create", "reservation", f"ReservationName={NAME}",
                f"StartTime={start}", "Duration=60", "Nodes=ALL", "Users=root",
                "Flags=MAINT,IGNORE_JOBS"])
    try:
        yield
    finally:
        client.run(["scontrol", "delete", f"ReservationName={NAME}"], check=False)


def test_a_time_into_the_window_is_refused_with_a_fix_that_chains(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    cli = Cli(devcluster, tmp_path)
    with maintenance_ahead(devcluster, 30):
        refused = cli("submit", "--profile", "local", "--gpus-per-node", "1", "--time", "120",
                      "--json")
        assert refused.returncode != 0
        error = json.loads(refused.stdout)["error"]
        assert f"runs into maintenance reservation '{NAME}'" in error["what"], error
        fix = re.search(r"--time (\S+) --chain (\d+)", error["what"])
        assert fix is not None, error
        chained = cli.submit("--gpus-per-node", "1", "--time", fix.group(1),
                             "--chain", fix.group(2))
        assert len(chained["chain"]) == int(fix.group(2)) >= 5, chained
        short = cli.submit("--gpus-per-node", "1", "--time", "10", "--", "true")
        done = cli.wait(str(short["job_id"]), lambda j: j["terminal"], 120)
        assert done["state"] == "COMPLETED", done
        cli.ok("cancel", str(chained["job_id"]))
        seen = json.loads(cli.ok("free", "-P", "local", "--json").stdout)
        (window,) = seen["profiles"][0]["maintenance"]
        assert window["name"] == NAME and window["partitions"] == [
            {"partition": "debug", "nodes_taken": 2, "nodes": 2}], window
        assert f"maintenance '{NAME}'" in cli.ok("free", "-P", "local").stdout


def test_why_names_the_window_a_waiting_job_waits_for(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    """Submitted before the window was announced, the job waits behind another; once that
    one is gone, SLURM keeps it waiting for the window."""
    cli = Cli(devcluster, tmp_path)
    blocker = cli.submit("--nodes", "2", "--gpus-per-node", "2", "--time", "5", "--",
                         "sleep", "300")
    cli.wait(str(blocker["job_id"]), lambda j: j["state"] == "RUNNING", 120)
    waiting = cli.submit("--gpus-per-node", "1", "--time", "120", "--", "true")
    job_id = str(waiting["job_id"])
    try:
        with maintenance_ahead(devcluster, 30):
            cli.ok("cancel", str(blocker["job_id"]))
            wait_for(lambda: devcluster.client().run(
                ["squeue", "-h", "-j", job_id, "-o", "%r"]).stdout.strip(), 120,
                "the maintenance reason", until=lambda r: "maintenance" in r)
            got = json.loads(cli.ok("why", job_id, "--json").stdout)
            assert got["cause"] == "pending", got
            assert f"waits for maintenance reservation '{NAME}'" in got["summary"], got
            assert re.search(r"--time \S+ --chain \d+", got["fix"]), got
            assert "let it wait until" in got["fix"], got
    finally:
        cli.ok("cancel", job_id)
