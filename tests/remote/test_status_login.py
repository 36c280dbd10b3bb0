"""`status` through a login (loopback sshd) whose history holds a sweep's unfinished points and
a plain job the controller has forgotten: squeue and sacct about both in one round trip, each
answer read in the form it was asked in. On SLURM 23.02 and later the round trip once asked in
text and read sacct's text as JSON, and the whole `status` failed (issue 40); the 24.11 lane
runs this file too (scripts/test.sh)."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.conftest import DevClusterHandle
from tests.remote.conftest import Laptop, Sshd
from tests.waits import wait_for


def test_status_with_running_points_and_a_forgotten_job(
        devcluster: DevClusterHandle, sshd: Sshd, laptop: Callable[..., Laptop]) -> None:
    lap = laptop(str(sshd.remote_home / "mixed proj"))
    lap.ok("login", "remote")
    # The plain job first: the points may hold every node until they are cancelled.
    plain = str(json.loads(lap.ok("submit", "--profile", "remote", "--time", "1",
                                  "--no-monitor", "--json", "--", "true").stdout)["job_id"])
    lap.ok("sweep", "--profile", "remote", "--login", "testlogin", "--time", "5",
           "--no-monitor", "--grid", "k=1,2", "--name", "mixed", "--json",
           "--", "sh", "-c", "sleep 300", "point")
    # No `status` until then: the history must still hold the job as unfinished when squeue
    # no longer lists it (MinJobAge), so that sacct is asked about it beside the points.
    client = devcluster.client()
    wait_for(lambda: plain not in client.squeue([plain]), 180,
             f"job {plain} gone from the controller", poll_s=2)
    try:
        before = len(sshd.commands())
        res = lap("status", "--json")
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
        assert len(sshd.commands()) == before + 1, "one status refresh = one remote command"
        listing = json.loads(res.stdout)
        assert listing["warnings"] == [] and "error" not in listing
        rows = {str(j["job_id"]): j for j in listing["jobs"]}
        assert rows[plain]["state"] == "COMPLETED" and rows[plain]["exit_code"] == 0
        (sweep,) = [j for j in listing["jobs"] if str(j["name"]).startswith("sweep mixed [")]
        assert not sweep["terminal"], sweep
        points = json.loads(lap.ok("status", "--study", "mixed", "--json").stdout)["jobs"]
        assert len(points) == 2 and {p["state"] for p in points} <= {"PENDING", "RUNNING"}
    finally:
        lap.ok("cancel", "--study", "mixed", "--yes")
