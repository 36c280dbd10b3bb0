"""`--global-batch`: real Lightning runs, here and as dev-cluster jobs, keep the effective batch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.jobs.helpers import cluster_env, hpctrain
from tests.waits import wait_for

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

# A tiny spiral run: 4,000 points, 2 epochs, a few seconds on one CPU.
TINY = ("--task", "spiral", "--max-epochs", "2", "--set", "data.samples=4000", "--seed", "7")


def train_here(run_dir: Path, *args: str) -> dict[str, Any]:
    res = subprocess.run([sys.executable, "-m", "hpctrain.trainer", *TINY, "--run-dir",
                          str(run_dir), *args], capture_output=True, text=True, timeout=300,
                         check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    return dict(json.loads((run_dir / "metrics.json").read_text()))


def losses(metrics: dict[str, Any]) -> list[float]:
    return [e["metrics"]["train_loss"] for e in metrics["epochs"]]


def test_accumulation_under_a_cap_trains_as_the_whole_batch(tmp_path: Path) -> None:
    whole = train_here(tmp_path / "whole", "--global-batch", "64")
    capped = train_here(tmp_path / "capped", "--global-batch", "64", "--max-device-batch", "16")
    assert (whole["batch_size_per_device"], whole["accumulate_grad_batches"]) == (64, 1)
    assert (capped["batch_size_per_device"], capped["accumulate_grad_batches"]) == (16, 4)
    assert whole["effective_batch_size"] == capped["effective_batch_size"] == 64
    assert losses(capped) == pytest.approx(losses(whole), rel=1e-4)
    assert "accumulate_grad_batches: 4" in (tmp_path / "capped" / "config.yaml").read_text()


def test_a_global_batch_the_world_cannot_split_is_refused(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "hpctrain.trainer", *TINY, "--run-dir",
                          str(tmp_path), "--global-batch", "64", "--max-device-batch", "16",
                          "--set", "trainer.accumulate_grad_batches=2"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "Error: trainer.global_batch: global batch 64 cannot be split" in res.stderr
    assert "use a global batch of 32" in res.stderr


def test_64_on_1x2_2x1_2x2_jobs(devcluster: DevClusterHandle, tmp_path: Path) -> None:
    env = cluster_env(devcluster.slurm_conf, tmp_path / "home")
    res = hpctrain("submit", "-P", "local", "--global-batch", "64", "--", "python", "train.py",
                   env=env, cwd=tmp_path)
    assert res.returncode == 1 and "applies to the packaged trainer" in res.stderr
    config = tmp_path / "tiny.yaml"
    config.write_text("task: spiral\nseed: 7\ndata: {samples: 4000}\ntrainer: {max_epochs: 2}\n")
    jobs = {}
    for nodes, gpus in ((1, 2), (2, 1), (2, 2)):
        res = hpctrain("submit", "-P", "local", "-N", str(nodes), "--gpus-per-node", str(gpus),
                       "-t", "5", "--no-monitor", "--json", "--global-batch", "64",
                       "--max-device-batch", "16", "--config", str(config),
                       env=env, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        jobs[f"{nodes}x{gpus}"] = json.loads(res.stdout)
    metrics = {k: wait_metrics(devcluster, Path(j["run_dir"]), j["job_id"])
               for k, j in jobs.items()}
    got = {k: (m["world_size"], m["batch_size_per_device"], m["accumulate_grad_batches"],
               m["effective_batch_size"]) for k, m in metrics.items()}
    assert got == {"1x2": (2, 16, 2, 64), "2x1": (2, 16, 2, 64), "2x2": (4, 16, 1, 64)}
    assert losses(metrics["1x2"]) == pytest.approx(losses(metrics["2x1"]), rel=1e-3)


def wait_metrics(cluster: DevClusterHandle, run_dir: Path, job_id: str) -> dict[str, Any]:
    row = cluster.wait_job(job_id, timeout_s=240)
    assert row["State"] == "COMPLETED", (row, _logs(run_dir))
    wait_for((run_dir / "metrics.json").exists, 60, f"metrics.json in {run_dir}")
    return dict(json.loads((run_dir / "metrics.json").read_text()))


def _logs(run_dir: Path) -> str:
    return "\n".join(f.read_text()[-3000:] for f in sorted(run_dir.glob("*.out")))
