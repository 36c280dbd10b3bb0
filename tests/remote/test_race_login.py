"""`--first-of` across profiles through logins (loopback sshd, issue 42): each profile's race is
synced and queued through its login, and the watcher the laptop starts refreshes and cancels
through the same logins (the laptop has no SLURM of its own)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import DevClusterHandle
from tests.remote.conftest import Laptop, Sshd
from tests.waits import wait_for


def test_a_race_across_two_logins_cancels_the_one_that_did_not_start(
        devcluster: DevClusterHandle, sshd: Sshd, laptop: Callable[..., Laptop]) -> None:
    lap = laptop(str(sshd.remote_home / "race proj"))
    lap.env["HPCTRAIN_RACE_POLL_S"] = "1"
    (lap.home / "config" / "profiles" / "remote2.yaml").write_text(
        "extends: remote\nname: remote2\n")
    lap.ok("login", "remote")
    client = devcluster.client()
    # node1's GPUs held for 10 minutes: only the 1x1 (5 minutes, node2) can start.
    blocker = client.run(["sbatch", "--parsable", "--time=10", "--gres=gpu:2", "-w", "node1",
                          "--output=/dev/null",
                          "--wrap", "sleep 300"]).stdout.strip().split(";")[0]
    try:
        wait_for(lambda: client.squeue([blocker]).get(blocker), 120, "the blocker running",
                 until=lambda j: j is not None and j.state.value == "RUNNING")
        got = json.loads(lap.ok("submit", "--profile", "remote", "--first-of",
                                "2x2,1x1@remote2", "--time", "5", "--json", "--",
                                "sleep", "20").stdout)
        assert [p["login"] for p in got["profiles"]] == ["testlogin", "testlogin"], got
        (held,), (free,) = ([a["job_id"] for a in p["alternatives"]] for p in got["profiles"])
        log = Path(got["watcher"]["log"])
        said = wait_for(lambda: log.read_text() if log.exists() else "", 120,
                        "the watcher's verdict", until=lambda text: "started first" in text)
        assert f"remote2 started first; cancelled 1 job(s) elsewhere: {held}" in said, said
        rows = {str(j["job_id"]): j for j in json.loads(
            lap.ok("status", "--all", "--json").stdout)["jobs"]}
        assert rows[held]["state"] == "CANCELLED", rows
    finally:
        client.run(["scancel", blocker], check=False)
