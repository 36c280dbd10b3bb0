"""The packaged trainer as a real SLURM job on the dev cluster: DDP over 2 nodes, and resume."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def submit(dc: DevClusterHandle, cwd: Path, *args: str) -> dict[str, Any]:
    """`hpctrain submit ... --json` from `cwd`, as a user in a project directory would."""
    r = subprocess.run(
        [sys.executable, "-m", "hpctrain", "submit", "--json", *args],
        cwd=cwd, env=dc.env(), capture_output=True, text=True, timeout=120, check=False,
    )
    assert r.returncode == 0, r.stderr
    data: dict[str, Any] = json.loads(r.stdout)
    return data


def finished(dc: DevClusterHandle, job: dict[str, object]) -> tuple[str, str]:
    """Wait for the job; return its sacct state and its output."""
    row = dc.wait_job(str(job["job_id"]), timeout_s=240)
    return row["State"], Path(str(job["stdout"])).read_text()


def test_two_node_ddp_job_trains_the_spiral(devcluster: DevClusterHandle, tmp_path: Path) -> None:
    job = submit(devcluster, tmp_path, "--profile", "local", "--nodes", "2")
    state, log = finished(devcluster, job)
    assert state == "COMPLETED", log
    assert "world_size=4 nodes=2 devices_per_node=2" in log
    run_dir = Path(str(job["run_dir"]))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["world_size"] == 4 and metrics["num_nodes"] == 2
    assert metrics["launch"] == "slurm" and metrics["slurm_job_id"] == str(job["job_id"])
    assert metrics["final_val_acc"] >= 0.9
    assert (run_dir / "last.ckpt").is_file() and (run_dir / "best.ckpt").is_file()


# Resuming is about the run directory, not the rank count: one rank on each of two nodes.
ONE_RANK_A_NODE = ("--profile", "local", "--nodes", "2", "--gpus-per-node", "1")


def test_resubmitted_job_resumes_at_the_next_epoch(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    run_dir = tmp_path / "shared-run"
    trainer = ["python", "-m", "hpctrain.trainer", "--task", "spiral", "--run-dir", str(run_dir)]
    first = submit(devcluster, tmp_path, *ONE_RANK_A_NODE, "--",
                   *trainer, "--max-epochs", "2")
    state, log = finished(devcluster, first)
    assert state == "COMPLETED", log
    assert re.findall(r"^epoch (\d+)/2 ", log, re.M) == ["1", "2"]

    second = submit(devcluster, tmp_path, *ONE_RANK_A_NODE, "--",
                    *trainer, "--max-epochs", "4")
    state, log = finished(devcluster, second)
    assert state == "COMPLETED", log
    assert re.findall(r"^epoch (\d+)/4 ", log, re.M) == ["3", "4"]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["first_epoch"] == 3 and metrics["epochs_completed"] == 4
    assert metrics["resumed_from"]


def test_raven_script_runs_on_an_emulated_raven(
    devcluster_with: object, tmp_path: Path
) -> None:
    """A raven script (modules, constraint, a100 GRES) runs on the dev cluster; modules skip."""
    dc = devcluster_with("raven")  # type: ignore[operator]
    job = submit(dc, tmp_path, "--profile", "raven", "--gpus-per-node", "2", "--time", "10",
                 "--", "bash", "-c", "echo rank=$SLURM_PROCID gpus=$SLURM_GPUS_ON_NODE")
    state, log = finished(dc, job)
    err = Path(str(job["stderr"])).read_text()
    assert state == "COMPLETED", log + err
    assert "dev cluster without modules; skipping: gcc/13 cuda/12.6" in err
    assert sorted(re.findall(r"rank=(\d)", log)) == ["0", "1"]


def test_hostile_job_name_round_trips_through_sbatch(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    """SLURM's own #SBATCH parser reads the quoted name back exactly; nothing injected runs."""
    # The job runs in tmp_path (sbatch's working directory), so an injected touch lands there.
    marker = tmp_path / "PWNED"
    name = "it's a \"job\" ; $(touch PWNED) `touch PWNED` # not a comment \\ end"
    job = submit(devcluster, tmp_path, "--profile", "local", "--job-name", name, "--",
                 "bash", "-c", 'printf "%s\\n" "$SLURM_JOB_NAME"')
    state, log = finished(devcluster, job)
    assert state == "COMPLETED", log
    assert log.splitlines()[-1] == name
    assert not marker.exists()
