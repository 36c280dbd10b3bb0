"""`up` repairs a dead daemon without touching what runs: a job on a healthy node survives."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.waits import wait_for

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = pytest.mark.cluster


def _pids(dc: DevClusterHandle) -> dict[str, int]:
    res = dc.cli("devcluster", "status", "--json")
    return {d["name"]: d["pid"] for d in json.loads(res.stdout)["daemons"]}


def _job_field(dc: DevClusterHandle, job: str, key: str) -> str:
    out = dc.client().run(["scontrol", "-o", "show", "job", job], check=False).stdout
    fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
    return fields.get(key, "")


def _wait(check: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None:
    wait_for(check, timeout_s, what, poll_s=0.2)


def _running_job(dc: DevClusterHandle, tmp_path: Path) -> tuple[str, Path]:
    """A small job that runs until the test creates `go`; its id and output file."""
    script = tmp_path / "wait for go.sh"
    script.write_text("#!/bin/bash\necho started\n"
                      "while [ ! -e go ]; do sleep 0.2; done\necho finished\n")
    job = dc.sbatch(script, "-n1", "--mem=100", "--time=00:02:00", "--output=job-%j.out")
    _wait(lambda: _job_field(dc, job, "JobState") == "RUNNING", f"start of job {job}")
    return job, tmp_path / f"job-{job}.out"


def _wait_state_saved(dc: DevClusterHandle, job: str) -> None:
    # slurmctld saves its state at most every 5 s after a change (SAVE_MAX_WAIT in its
    # state_save.c): a controller killed sooner comes back without the job's start, whatever
    # `up` does. A save comes only after a change, and the one after the start may be done
    # already: make a change now (the job's comment) and wait for the save that follows it.
    job_state = dc.directory / "spool" / "ctld" / "job_state"
    since = time.time()
    dc.client().run(["scontrol", "update", f"JobId={job}", "Comment=state-save"])
    _wait(lambda: job_state.stat().st_mtime > since, "state save by slurmctld after a change "
          f"to job {job}", 60.0)


def _victims(dc: DevClusterHandle, job: str, which: str) -> list[str]:
    node = _job_field(dc, job, "NodeList")
    other = next(n for n in dc.node_names if n != node)
    return {"other slurmd": [f"slurmd:{other}"], "own slurmd": [f"slurmd:{node}"],
            "munged+mysqld": ["munged", "mysqld"]}.get(which, [which])


@pytest.mark.parametrize("which", ["slurmdbd", "other slurmd", "slurmctld", "own slurmd",
                                   "munged+mysqld"])
def test_repair_restarts_only_the_dead_and_keeps_a_running_job(
    devcluster: DevClusterHandle, tmp_path: Path, which: str,
) -> None:
    job, out = _running_job(devcluster, tmp_path)
    victims = _victims(devcluster, job, which)
    if "slurmctld" in victims:
        _wait_state_saved(devcluster, job)
    before = _pids(devcluster)
    for victim in victims:
        os.kill(before[victim], signal.SIGKILL)
    res = devcluster.cli("devcluster", "up", timeout_s=60)
    assert res.returncode == 0, res.stderr
    assert "repaired in" in res.stdout and f"(started {', '.join(victims)})" in res.stdout, \
        res.stdout
    after = _pids(devcluster)
    assert all(after[v] != before[v] for v in victims)
    assert {n: p for n, p in after.items() if n not in victims} == {
        n: p for n, p in before.items() if n not in victims}, "only the dead daemons restart"
    assert _job_field(devcluster, job, "JobState") == "RUNNING"
    (tmp_path / "go").touch()
    row = devcluster.wait_job(job, timeout_s=30)
    assert row["State"] == "COMPLETED", row
    assert _job_field(devcluster, job, "Restarts") == "0"
    assert out.read_text().splitlines() == ["started", "finished"]
