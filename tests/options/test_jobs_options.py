"""`status --last` and `cancel` of several ids on the dev cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import DevClusterHandle

from .helpers import User


@pytest.fixture
def user(devcluster: DevClusterHandle, tmp_path: Path) -> User:
    return User(devcluster, tmp_path)


def _submit(user: User, *command: str) -> str:
    return str(user.json("submit", "--profile", "local", "--time", "2", "--gpus-per-node", "0",
                         "--no-monitor", "--json", "--", *command)["job_id"])


def test_status_last_counts_finished_jobs(user: User, devcluster: DevClusterHandle) -> None:
    ids = [_submit(user, "true") for _ in range(3)]
    for job_id in ids:
        devcluster.wait_job(job_id)
    user.jobs(*ids)  # records the finished states: none is unfinished below
    shown = {n: [j["job_id"] for j in user.json("status", "--last", n, "--json")["jobs"]]
             for n in ("0", "1", "2")}
    assert shown == {"0": [], "1": ids[2:], "2": ids[1:]}
    assert [j["job_id"] for j in user.jobs()] == ids  # the default, 20, holds all three


def test_cancel_several_ids_cancels_those_only(
    user: User, devcluster: DevClusterHandle
) -> None:
    a, b, keep = (_submit(user, "sleep", "300") for _ in range(3))
    try:
        report = user.json("cancel", a, b, "--json")
        assert sorted(report["cancelled"]) == sorted([a, b]) and report["skipped"] == [], report
        for job_id in (a, b):
            assert devcluster.wait_job(job_id, timeout_s=30)["State"].split()[0] == "CANCELLED"
        (kept,) = user.jobs(keep)
        assert kept["state"] in ("PENDING", "RUNNING"), kept
    finally:
        user.ok("cancel", keep)
