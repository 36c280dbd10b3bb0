"""SBATCH_* variables of the submitting shell cannot override hpctrain's script (docs/jobs.md,
"Variables from your shell"): on the dev cluster, the queued job has hpctrain's name and limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DevClusterHandle
from tests.jobs.test_jobs_cluster import Cli

pytestmark = [pytest.mark.cluster]


def test_sbatch_variables_in_the_shell_leave_the_job_as_planned(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    cli = Cli(devcluster, tmp_path, SBATCH_TIMELIMIT="2", SBATCH_JOB_NAME="stale")
    res = cli.ok("submit", "--profile", "local", "--time", "10", "--job-name", "mine", "--json",
                 "--sbatch-arg=--hold", "--", "sleep", "30")
    job_id = json.loads(res.stdout)["job_id"]
    client = devcluster.client()
    try:
        shown = client.run(["scontrol", "show", "job", job_id]).stdout
        # scontrol ends a line after JobName: compare whole words.
        assert {"JobName=mine", "TimeLimit=00:10:00"} <= set(shown.split()), shown
        listed = client.run(["squeue", "--noheader", "--jobs", job_id,
                             "--format=%j|%l"]).stdout.strip()
        assert listed == "mine|10:00", listed
        assert cli.job(job_id)["name"] == "mine"
    finally:
        client.scancel([job_id])
