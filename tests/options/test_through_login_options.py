"""--login on submit, status, logs and cancel, succeeding: a laptop, a real sshd on loopback
(tests/remote/conftest.py) with two aliases of the same login, and the dev cluster behind it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.conftest import DevClusterHandle
from tests.remote.conftest import Laptop, Sshd

OTHER = "otherlogin"


def _ids(res: subprocess.CompletedProcess[str]) -> list[str]:
    return [j["job_id"] for j in json.loads(res.stdout)["jobs"]]


def test_login_option_picks_the_destination_on_every_command(
    devcluster: DevClusterHandle, sshd: Sshd, laptop: Callable[..., Laptop], tmp_path: Path
) -> None:
    sshd.add_alias(OTHER)
    lap = laptop(str(sshd.remote_home / "proj"))
    lap.ok("login", "remote")
    lap.ok("login", OTHER, "--ssh-config", str(sshd.client_config))
    try:
        plain = json.loads(lap.ok("submit", "--profile", "remote", "--time", "2",
                                  "--no-monitor", "--json", "--", "sleep", "300").stdout)
        other = json.loads(lap.ok("submit", "--profile", "remote", "--login", OTHER, "--time",
                                  "2", "--no-monitor", "--json", "--", "sleep", "300").stdout)
        said = json.loads(lap.ok("submit", "--profile", "remote", "--login", OTHER, "--time",
                                 "2", "--no-monitor", "--json", "--", "echo", "via-other").stdout)
        assert plain["login"] == "testlogin" and other["login"] == OTHER == said["login"]
        ids = [str(d["job_id"]) for d in (plain, other, said)]

        assert _ids(lap.ok("status", "--login", OTHER, "--json")) == ids[1:]
        assert _ids(lap.ok("status", "--login", "testlogin", "--json")) == ids[:1]

        devcluster.wait_job(ids[2])
        # The history learns it ended (cancel --all takes the jobs it thinks unfinished).
        (ended,) = json.loads(lap.ok("status", ids[2], "--json").stdout)["jobs"]
        assert ended["state"] == "COMPLETED"
        # With OTHER's connection closed, the job is reached only through the other alias.
        lap.ok("login", OTHER, "--ssh-config", str(sshd.client_config), "--close")
        refused = lap("logs", ids[2])
        assert refused.returncode == 1 and "no open ssh connection" in refused.stderr
        shown = lap.ok("logs", ids[2], "--login", "testlogin").stdout
        assert shown.splitlines()[-1] == "via-other", shown
        lap.ok("login", OTHER, "--ssh-config", str(sshd.client_config))

        cancelled = json.loads(lap.ok("cancel", "--all", "--yes", "--login", OTHER,
                                      "--json").stdout)
        assert cancelled["cancelled"] == [ids[1]]
        assert devcluster.wait_job(ids[1], timeout_s=30)["State"].split()[0] == "CANCELLED"
        (job,) = json.loads(lap.ok("status", ids[0], "--json").stdout)["jobs"]
        assert job["state"] in ("PENDING", "RUNNING")
    finally:
        lap("cancel", "--all", "--yes", "--login", "testlogin")
        lap("cancel", "--all", "--yes", "--login", OTHER)
        lap("login", OTHER, "--ssh-config", str(sshd.client_config), "--close")
