"""`hpctrain scale` options on the dev cluster (two partitions): without --wait it submits every
run and returns, and scale-report completes the table; --strong splits --batch-size; --config,
--task, --max-epochs, --set reach the trainer; --partition, -A, -t, --monitor-interval reach the
job; --parallel with --wait submits the next run before the first has ended; --repeats runs each
topology that many times; --target (scale's, or scale-report's instead) gives the time to it."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from tests.options.conftest import TWO_PARTITIONS

from .helpers import sacct

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
# Not the spiral task's learning rate (0.02), and not scaled by the ranks.
CONFIG = "optim:\n  lr: 0.0123\n  scale_lr: none\n"


def hpctrain(dc: DevClusterHandle, cwd: Path, *args: str, timeout_s: float = 120
             ) -> subprocess.CompletedProcess[str]:
    """The CLI against the dev cluster, with a history of this test's own."""
    return subprocess.run([sys.executable, "-m", "hpctrain", *args], cwd=cwd,
                          env=dc.env(HPCTRAIN_HOME=str(cwd / "home")), capture_output=True,
                          text=True, timeout=timeout_s, stdin=subprocess.DEVNULL, check=False)


def metrics(run: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((Path(run["run_dir"]) / "metrics.json").read_text())
    return data


def test_without_wait_submits_all_and_report_completes(two_partitions: DevClusterHandle,
                                                       tmp_path: Path) -> None:
    dc = two_partitions
    config = tmp_path / "trainer.yaml"
    config.write_text(CONFIG)
    res = hpctrain(dc, tmp_path, "scale", "-P", str(TWO_PARTITIONS), "-T", "1x1,1x2", "--strong",
                   "--batch-size", "64", "--config", str(config), "--task", "spiral",
                   "--max-epochs", "2", "--set", "data.samples=2000", "--partition", "batch",
                   "-A", "hpctrain-test", "-t", "5", "--monitor-interval", "2",
                   "--name", "no wait", "--repeats", "1", "--target", "val_acc=0.01", "--json")
    assert res.returncode == 0, res.stderr
    first = json.loads(res.stdout)
    ids = [str(r["job_id"]) for r in first["runs"]]
    # Returned once both were submitted, neither ended: both pending, no plot yet.
    assert all(i != "None" for i in ids) and sorted(map(str, first["pending"])) == sorted(ids)
    assert first["plot"] is None and first["target"] == "val_acc>=0.01"
    # --repeats 1: one job per topology.
    assert [r["job_ids"] for r in first["runs"]] == [[i] for i in ids]
    for job_id in ids:
        assert dc.wait_job(job_id, timeout_s=400)["State"] == "COMPLETED"
        assert sacct(dc, job_id, "Partition,Account,Timelimit") == {
            "Partition": "batch", "Account": "hpctrain-test", "Timelimit": "00:05:00"}
    report = hpctrain(dc, tmp_path, "scale-report", "no wait", "--json")
    assert report.returncode == 0, report.stderr
    data = json.loads(report.stdout)
    assert data["pending"] == [] and data["mode"] == "strong"
    assert Path(data["plot"]).read_bytes()[:4] == b"\x89PNG"
    runs = data["runs"]
    assert [r["state"] for r in runs] == ["COMPLETED", "COMPLETED"]
    # --strong: the global batch of 64 split over 1 and 2 ranks, as the runs really trained.
    assert [(r["batch_per_device"], r["global_batch"]) for r in runs] == [(64, 64), (32, 64)]
    trained = [metrics(r) for r in runs]
    assert [(m["world_size"], m["batch_size_per_device"], m["effective_batch_size"])
            for m in trained] == [(1, 64, 64), (2, 32, 64)]
    # The study's --target: an accuracy any epoch has, reached at the end of the first epoch.
    assert data["target"] == "val_acc>=0.01"
    for run, m in zip(runs, trained, strict=True):
        first_epoch = (m["startup_s"] or 0) + m["epochs"][0]["time_s"]
        assert run["target_reached"] == 1
        assert run["time_to_target_s"] == pytest.approx(first_epoch, abs=0.01)
    # scale-report --target instead of the study's: a loss no epoch gets to.
    other = hpctrain(dc, tmp_path, "scale-report", "no wait", "--target", "val_loss<=0.0001",
                     "--json")
    assert other.returncode == 0, other.stderr
    again = json.loads(other.stdout)
    assert again["target"] == "val_loss<=0.0001"
    assert [(r["target_reached"], r["time_to_target_s"]) for r in again["runs"]] == [(0, None)] * 2
    for run, m in zip(runs, trained, strict=True):
        assert (m["task"], m["epochs_completed"], m["learning_rate"]) == ("spiral", 2, 0.0123)
        # spiral is also the trainer's default task: --task shows in the command SLURM ran.
        script = (Path(run["run_dir"]) / "job.sbatch").read_text()
        assert "  hpctrain-srun python -m hpctrain.trainer --task spiral " in script
        resolved = yaml.safe_load((Path(run["run_dir"]) / "config.yaml").read_text())
        assert resolved["data"]["samples"] == 2000
        start = json.loads(next((Path(run["run_dir"]) / "monitor").glob("*.jsonl"))
                           .read_text().splitlines()[0])
        assert (start["kind"], start["interval_s"]) == ("start", 2)


def test_parallel_submits_before_the_first_run_ends(two_partitions: DevClusterHandle,
                                                    tmp_path: Path) -> None:
    dc = two_partitions
    res = hpctrain(dc, tmp_path, "scale", "--profile", str(TWO_PARTITIONS), "--topologies",
                   "1x1,1x2", "--task", "spiral", "--max-epochs", "1", "--set",
                   "data.samples=2000", "--time", "5", "--name", "parallel", "--wait",
                   "--parallel", "--wait-timeout", "500", "--repeats", "2", "--json",
                   timeout_s=600)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["pending"] == [] and data["mode"] == "weak"
    assert [r["state"] for r in data["runs"]] == ["COMPLETED", "COMPLETED"], res.stderr
    # --repeats 2: two jobs per topology, each measured.
    for row in data["runs"]:
        assert [p["repeat"] for p in row["repeats"]] == [1, 2]
        assert len(set(row["job_ids"])) == 2 and row["job_ids"][0] == row["job_id"]
        assert all(p["state"] == "COMPLETED" and p["epoch_samples_per_s"]
                   for p in row["repeats"])
    first, second = (sacct(dc, str(r["job_id"]), "Submit,End") for r in data["runs"])
    # One at a time would submit the second only after the first had ended.
    assert datetime.fromisoformat(second["Submit"]) < datetime.fromisoformat(first["End"])
