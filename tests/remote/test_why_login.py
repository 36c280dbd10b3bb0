"""`hpctrain why` for a job submitted through a login (loopback sshd): the accounting and the
logs are read there, over the ssh master; the laptop has no SLURM of its own."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.conftest import DevClusterHandle
from tests.diagnosis.programs import write_project
from tests.remote.conftest import Laptop, Sshd
from tests.waits import wait_for


def test_why_reads_the_login_s_accounting_and_logs(
    devcluster: DevClusterHandle, sshd: Sshd, laptop: Callable[..., Laptop],
) -> None:
    lap = laptop(str(sshd.remote_home / "why proj"))
    lap.ok("login", "remote")
    write_project(lap.project)
    job = json.loads(lap.ok("submit", "--profile", "remote", "--time", "2", "--json", "--",
                            "python3", "-m", "pkg.exc").stdout)
    job_id = str(job["job_id"])
    wait_for(lambda: json.loads(lap.ok("status", job_id, "--json").stdout)["jobs"][0], 180,
             f"job {job_id} ended", until=lambda j: j["terminal"], poll_s=2)
    got = json.loads(lap.ok("why", job_id, "--json").stdout)
    assert got["cause"] == "exception" and "ZeroDivisionError" in got["summary"]
    # The frame is the login's snapshot of the laptop's file.
    assert str(sshd.remote_home / "why proj") in got["summary"] and "pkg/exc.py:2" in \
        got["summary"]
    assert got["logs_read"] and all(p.startswith(str(sshd.remote_home)) for p in got["logs_read"])
