"""The stall watch through a login (loopback sshd, issue 41): status reads the stall report
there (one round trip for the jobs it first sees ended), why names the hung rank, its node,
the collective and its frame from the evidence kept there; the rank hung in the program's own
code, so no node is held against (issue 51), through a login as on this machine."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.conftest import DevClusterHandle
from tests.remote.conftest import Laptop, Sshd
from tests.waits import wait_for

PROGRAM = Path(__file__).resolve().parents[2] / "examples" / "stall" / "hang_in_collective.py"


def test_a_stall_is_explained_through_a_login_and_no_node_blamed(
    devcluster: DevClusterHandle, sshd: Sshd, laptop: Callable[..., Laptop],
) -> None:
    lap = laptop(str(sshd.remote_home / "stall proj"))
    lap.ok("login", "remote")
    shutil.copy(PROGRAM, lap.project / PROGRAM.name)
    job = json.loads(lap.ok("submit", "--profile", "remote", "--time", "10", "--json",
                            "--nodes", "2", "--gpus-per-node", "1", "--stall-window", "20",
                            "--", "python", PROGRAM.name).stdout)
    job_id = str(job["job_id"])
    ended = wait_for(lambda: json.loads(lap.ok("status", job_id, "--json").stdout)["jobs"][0],
                     300, f"job {job_id} ended", until=lambda j: j["terminal"], poll_s=2)
    assert ended["state"] == "CANCELLED" and ended["verdict"] == "stalled", ended
    got = json.loads(lap.ok("why", job_id, "--json").stdout)
    assert got["cause"] == "stalled", got
    assert "rank 1 on node" in got["summary"] and "never entered all_reduce #" in got["summary"]
    assert "rank 0 waited in it" in got["summary"]
    assert "rank 1 was in load_next_shard (hang_in_collective.py:" in got["summary"]
    listed = json.loads(lap.ok("nodes", "--json").stdout)
    assert listed["nodes"] == [] and listed["watched"] == [], listed
