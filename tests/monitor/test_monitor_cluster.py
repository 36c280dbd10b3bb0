"""The monitor and scaling studies on the dev cluster: every node sampled, kills survived."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
TINY = ("--task", "spiral", "--max-epochs", "2", "--set", "data.samples=20000")


def hpctrain(dc: DevClusterHandle, cwd: Path, *args: str, timeout_s: float = 120
             ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpctrain", *args], cwd=cwd, env=dc.env(),
                          capture_output=True, text=True, timeout=timeout_s, check=False)


def submit(dc: DevClusterHandle, cwd: Path, *args: str) -> dict[str, Any]:
    res = hpctrain(dc, cwd, "submit", "--json", "--profile", "local", "--nodes", "2",
                   "--time", "5", *args)
    assert res.returncode == 0, res.stderr
    data: dict[str, Any] = json.loads(res.stdout)
    return data


def stats(dc: DevClusterHandle, cwd: Path, job_id: str) -> dict[str, Any]:
    res = hpctrain(dc, cwd, "stats", job_id, "--json")
    assert res.returncode == 0, res.stderr
    data: dict[str, Any] = json.loads(res.stdout)
    return data


def test_two_node_job_is_sampled_on_both_nodes(devcluster: DevClusterHandle,
                                                tmp_path: Path) -> None:
    job = submit(devcluster, tmp_path, "--", "python", "-m", "hpctrain.trainer", *TINY)
    row = devcluster.wait_job(str(job["job_id"]), timeout_s=240)
    run_dir = Path(job["run_dir"])
    err = (run_dir / f"hpctrain-{job['job_id']}.err").read_text()
    assert row["State"] == "COMPLETED", err
    assert "world_size=4" in (run_dir / f"hpctrain-{job['job_id']}.out").read_text()
    data = stats(devcluster, tmp_path, str(job["job_id"]))
    assert [n["node"] for n in data["nodes"]] == ["node1", "node2"]
    assert all(n["samples"] >= 1 and n["cpu_mean_pct"] is not None for n in data["nodes"])
    # Stopped by the script (USR2), not killed: each sampler wrote its end row.
    for node in ("node1", "node2"):
        last = (run_dir / "monitor" / f"{node}.jsonl").read_text().splitlines()[-1]
        assert json.loads(last)["kind"] == "end"
    assert "Killed" not in err and "CANCELLED" not in err
    summary = json.loads((run_dir / "monitor-summary.json").read_text())
    assert summary["samples"] == data["samples"]
    status = json.loads(hpctrain(devcluster, tmp_path, "status", str(job["job_id"]),
                                 "--json").stdout)
    assert status["jobs"][0]["monitor"]["samples"] == data["samples"]


def test_cancelled_job_keeps_its_samples(devcluster: DevClusterHandle, tmp_path: Path) -> None:
    job = submit(devcluster, tmp_path, "--", "sleep", "300")
    folder = Path(job["run_dir"]) / "monitor"
    deadline = time.monotonic() + 120
    while True:
        files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
        if len(files) == 2 and all('"sample"' in f.read_text() for f in files):
            break
        assert time.monotonic() < deadline, f"no sample from both nodes after 120 s: {files}"
        time.sleep(0.5)
    res = hpctrain(devcluster, tmp_path, "cancel", str(job["job_id"]))
    assert res.returncode == 0, res.stderr
    assert devcluster.wait_job(str(job["job_id"]), timeout_s=60)["State"].startswith("CANCELLED")
    data = stats(devcluster, tmp_path, str(job["job_id"]))
    assert [n["node"] for n in data["nodes"]] == ["node1", "node2"]
    assert all(n["samples"] >= 1 for n in data["nodes"])


def _second_epoch_rate(run_dir: str) -> float:
    """Samples per second of training in epoch 2 of 2 (the first is the warm-up), from
    metrics.json as the trainer wrote it."""
    epochs = json.loads((Path(run_dir) / "metrics.json").read_text())["epochs"]
    assert [e["epoch"] for e in epochs] == [1, 2]
    return float(epochs[1]["samples"]) / float(epochs[1]["train_time_s"])


def test_scaling_study_on_the_dev_cluster(devcluster: DevClusterHandle, tmp_path: Path) -> None:
    # The dev cluster's history outlives test runs: a study's name must be new each time.
    name = f"dev study {os.urandom(3).hex()}"
    res = hpctrain(devcluster, tmp_path, "scale", "--profile", "local", "--repeats", "1",
                   "--topologies", "1x1,1x2,2x2", *TINY, "--time", "5", "--name", name, "--wait",
                   "--wait-timeout", "500", "--json", timeout_s=600)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    rows = {r["topology"]: r for r in data["runs"]}
    assert list(rows) == ["1x1", "1x2", "2x2"] and data["pending"] == []
    assert all(r["state"] == "COMPLETED" for r in rows.values()), res.stderr
    assert {t: r["gpus"] for t, r in rows.items()} == {"1x1": 1, "1x2": 2, "2x2": 4}
    base = _second_epoch_rate(rows["1x1"]["run_dir"])
    for topology, gpus in (("1x1", 1), ("1x2", 2), ("2x2", 4)):
        speedup = _second_epoch_rate(rows[topology]["run_dir"]) / base
        assert rows[topology]["speedup"] == pytest.approx(speedup, rel=1e-2)
        assert rows[topology]["efficiency"] == pytest.approx(speedup / gpus, rel=1e-2)
    assert Path(data["plot"]).read_bytes()[:4] == b"\x89PNG"
    again = hpctrain(devcluster, tmp_path, "scale-report", name, "--json")
    assert json.loads(again.stdout)["runs"] == data["runs"]
