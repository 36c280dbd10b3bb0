"""`status` of a torchrun job whose worker raised: INFO names the worker's own error, not
torchrun's summary (`...errors.ChildFailedError:`, cut before its message, in the newcomer
review of 2026-11-29, friction 15)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import DevClusterHandle
from tests.jobs.test_jobs_cluster import Cli

pytestmark = [pytest.mark.cluster]
PROGRAM = Path(__file__).resolve().parents[2] / "examples" / "faults" / "ddp_faults.py"


def test_status_info_of_a_torchrun_job_names_the_workers_error(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    cli = Cli(devcluster, tmp_path)
    shutil.copy(PROGRAM, cli.cwd / "train.py")
    job = cli.submit("--gpus-per-node", "2", "--launcher", "torchrun", "--", "python",
                     "train.py", "--fault", "raise", "--rank", "1", "--at", "2")
    job_id = str(job["job_id"])
    ended = cli.wait(job_id, lambda j: j["terminal"], 240)
    assert ended["state"] == "FAILED", ended
    assert ended["verdict"].startswith("rank 1: RuntimeError: simulated bug on rank 1"), ended
    shown = cli.ok("status", job_id).stdout
    assert "rank 1: RuntimeError: simulated bug on rank 1" in shown, shown
    assert "ChildFailedError" not in shown, shown
