"""A script from `hpctrain render -o` submitted by plain sbatch keeps its output.

SLURM opens --output before the script runs and creates no directory for it: a relative log
directory nobody made lost the job's output. render -o names it absolutely and creates it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DevClusterHandle

pytestmark = [pytest.mark.cluster]


def test_rendered_script_under_plain_sbatch_writes_its_log(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    work = tmp_path / "project dir"
    (work / "scripts").mkdir(parents=True)
    # Rendered in the project; sbatch (the handle's) runs from the script's own folder, where
    # a relative hpctrain-runs/ would not be.
    res = subprocess.run(
        [sys.executable, "-m", "hpctrain", "render", "--profile", "local", "--gpus-per-node",
         "1", "--time", "2", "--no-monitor", "-o", "scripts/job.sh", "--",
         "echo", "hello from the job"],
        cwd=work, env=devcluster.env(), capture_output=True, text=True, timeout=120,
        check=False)
    assert res.returncode == 0, res.stderr
    logs = work / "hpctrain-runs"
    assert logs.is_dir() and str(logs) in res.stderr
    job_id = devcluster.sbatch(work / "scripts" / "job.sh")
    row = devcluster.wait_job(job_id, timeout_s=120)
    log = logs / f"hpctrain-{job_id}.out"
    assert log.is_file(), sorted(p.name for p in logs.iterdir())
    text = log.read_text()
    assert row["State"] == "COMPLETED", text
    assert f"hpctrain: job {job_id}" in text and "hello from the job" in text
    assert not (work / "scripts" / "hpctrain-runs").exists()
