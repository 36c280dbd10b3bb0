"""The start-up timeline of a real 2-node training job on the dev cluster: the batch script's
marks and every rank's, shown by `status JOB` and `why JOB`, under srun and the per-node launch
(issue 43)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _hpctrain(dc: DevClusterHandle, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpctrain", *args], cwd=cwd, env=dc.env(),
                          capture_output=True, text=True, timeout=120, check=False)


# srun starts every rank, each importing; per-node starts one trainer a node, which imports once
# and forks its workers (trainer/workers.py): each rank's record begins with the trainer's marks.
_MARKS = {
    "srun": ["process started", "imports done", "process group formed", "data ready",
             "first step"],
    "per-node": ["process started", "imports done", "worker started", "process group formed",
                 "data ready", "first step"],
}


@pytest.mark.parametrize("launcher", sorted(_MARKS))
def test_status_and_why_show_each_ranks_start_up(devcluster: DevClusterHandle, tmp_path: Path,
                                                 launcher: str) -> None:
    sub = _hpctrain(devcluster, tmp_path, "submit", "--json", "--profile", "local",
                    "--nodes", "2", "--launcher", launcher)
    assert sub.returncode == 0, sub.stderr
    job: dict[str, Any] = json.loads(sub.stdout)
    job_id = str(job["job_id"])
    row = devcluster.wait_job(job_id, timeout_s=240)
    assert row["State"] == "COMPLETED", Path(str(job["stdout"])).read_text()

    status = _hpctrain(devcluster, tmp_path, "status", job_id, "--json")
    assert status.returncode == 0, status.stderr
    got = json.loads(status.stdout)["jobs"][0]["startup"]
    assert got["job_id"] == job_id and got["origin"] == "job's start"
    tracks = {(t["node"], t["rank"]): [m["mark"] for m in t["marks"]] for t in got["tracks"]}
    # The batch script runs on the first node; two ranks on each node.
    assert tracks.pop(("node1", None)) == [
        "job started", "environment activated", "ranks launched"]
    assert sorted(tracks) == [("node1", 0), ("node1", 1), ("node2", 2), ("node2", 3)]
    for marks in tracks.values():
        assert marks == _MARKS[launcher]
    assert 0 < got["total_s"] < 240 and got["dominated"]
    at = {m["mark"]: m["at_s"] for t in got["tracks"] for m in t["marks"] if t["rank"] == 0}
    assert 0 <= at["process started"] < at["imports done"] < at["first step"] <= got["total_s"]

    text = _hpctrain(devcluster, tmp_path, "status", job_id)
    assert text.returncode == 0, text.stderr
    assert f"start-up: first step {got['total_s']:.1f} s after the job's start" in text.stdout
    for who in ("node1 batch script", "node1 rank 0", "node1 rank 1", "node2 rank 2",
                "node2 rank 3"):
        assert f"    {who}: " in text.stdout, text.stdout

    why = _hpctrain(devcluster, tmp_path, "why", job_id)
    assert why.returncode == 0, why.stderr
    assert f"start-up: first step {got['total_s']:.1f} s" in why.stdout
    assert "  node2 rank 3: process started +" in why.stdout, why.stdout
