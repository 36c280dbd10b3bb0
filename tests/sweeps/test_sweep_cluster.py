"""`hpctrain sweep` on the dev cluster: one sbatch per array, every point a real training in its
own run directory, the study one row in `status` from two SLURM calls, cancel, the report."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DevClusterHandle
from tests.options.helpers import User
from tests.waits import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# Small and fast: the spiral task on 2,000 samples, one epoch, one GPU (one rank) a point.
SPIRAL = ("--task", "spiral", "--max-epochs", "1", "--set", "data.samples=2000",
          "--gpus-per-node", "1", "--time", "5", "--no-monitor")


@pytest.fixture
def user(devcluster: DevClusterHandle, tmp_path: Path) -> User:
    return User(devcluster, tmp_path)


def _slurm_calls(stderr: str) -> list[str]:
    """The SLURM commands `--debug` logged (the version probe aside: it asks no daemon)."""
    return [m.group(1) for m in re.finditer(r"debug: hpctrain\.slurm: (\w+) ", stderr)
            if m.group(1) != "sinfo"]


def _row(user: User, name: str) -> dict[str, Any]:
    rows = [j for j in user.jobs() if j["name"].startswith(f"sweep {name} [")]
    assert len(rows) == 1, user.jobs()
    return rows[0]


def test_24_point_grid_is_one_sbatch_one_status_row_and_a_report(user: User) -> None:
    res = user.ok("--debug", "sweep", "--profile", "local", *SPIRAL,
                  "--grid", "optim.lr=0.3,0.1,0.03,0.01",
                  "--grid", "trainer.batch_size=32,64,128", "--grid", "seed=1,2",
                  "--max-parallel", "4", "--name", "lr-bs", "--json")
    assert _slurm_calls(res.stderr).count("sbatch") == 1, res.stderr
    done = json.loads(res.stdout)
    assert done["points"] == 24 and len(done["arrays"]) == 1
    run_dir = Path(done["run_dir"])
    args = (run_dir / "points" / "013" / "point.args").read_text().splitlines()
    assert args == ["--set", "optim.lr=0.03", "--set", "trainer.batch_size=32",
                    "--set", "seed=2"]

    def finished() -> dict[str, Any]:
        return _row(user, "lr-bs")

    row = wait_for(finished, 900, "the 24 points to end", until=lambda r: r["terminal"])
    assert row["state"] == "COMPLETED", row
    assert "24/24 done" in row["name"]
    # However many points: one squeue, and one sacct for those squeue shows ended.
    refresh = user("--debug", "status", "--study", "lr-bs")
    assert len(_slurm_calls(refresh.stderr)) <= 2, refresh.stderr

    report = user.json("sweep-report", "lr-bs", "--json")
    assert report["metric"] == "val_acc" and report["mode"] == "max"
    assert [p["point"] for p in report["points"]] == list(range(24))
    assert all(p["state"] == "COMPLETED" and p["best"] is not None for p in report["points"])
    # Each point trained with its own settings (the trainer's resolved config says so).
    for p in report["points"][:3]:
        config = (Path(p["run_dir"]) / "config.yaml").read_text()
        assert f"lr: {p['settings']['optim.lr']}" in config
        assert f"batch_size: {p['settings']['trainer.batch_size']}" in config
    best = report["best"]
    assert best["best"] == max(p["best"] for p in report["points"])
    plot = Path(report["plot"])
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = user.ok("sweep-report", "lr-bs").stdout
    assert "optim.lr" in table and f"best: point {best['point']}" in table


def test_cancel_of_the_study_leaves_nothing_queued(user: User, devcluster: DevClusterHandle
                                                   ) -> None:
    done = user.json("sweep", "--profile", "local", "--time", "5", "--no-monitor",
                     "--sample", "x=uniform:0,1", "--samples", "30", "--seed", "3",
                     "--max-parallel", "2", "--name", "to-cancel", "--json",
                     # The point's setting comes last: bash's $1, which sleep never sees.
                     "--", "bash", "-c", "sleep 300", "point")
    array = done["arrays"][0][0]
    wait_for(lambda: _row(user, "to-cancel"), 60, "two points running",
             until=lambda r: "2 running" in r["name"])
    res = user.ok("--debug", "cancel", "--study", "to-cancel", "--json")
    assert _slurm_calls(res.stderr).count("scancel") == 1
    assert len(json.loads(res.stdout)["cancelled"]) == 30

    def queued() -> list[str]:
        return devcluster.client().run(["squeue", "--noheader", "--array", "--jobs", array,
                                        "--format=%i %T"]).stdout.split("\n")

    left = wait_for(queued, 60, "the array to leave the queue",
                    until=lambda lines: not any(ln.strip() for ln in lines
                                                if "CANCELLED" not in ln))
    assert not [ln for ln in left if ln.strip() and "CANCELLED" not in ln]
    row = wait_for(lambda: _row(user, "to-cancel"), 60, "the study to show ended",
                   until=lambda r: r["terminal"])
    assert "0/30 done, 30 cancelled" in row["name"] and row["state"] == "CANCELLED", row


def test_sweep_over_max_array_size_is_split_and_throttled(user: User,
                                                          devcluster: DevClusterHandle) -> None:
    """The dev cluster's MaxArraySize is SLURM's own 1001 (`scontrol show config` says it):
    1,100 points are two arrays, the second waiting for the first, each `%3`."""
    limit = devcluster.client().config()["MaxArraySize"]
    count = int(limit) + 99
    res = user.ok("--debug", "sweep", "--profile", "local", "--time", "2", "--no-monitor",
                  "--sample", "k=int:0,100000", "--samples", str(count), "--max-parallel", "3",
                  "--name", "split", "--json", "--", "true", timeout_s=300)
    assert _slurm_calls(res.stderr).count("sbatch") == 2
    done = json.loads(res.stdout)
    first, second = (a[0] for a in done["arrays"])
    try:
        shown = devcluster.client().run(
            ["scontrol", "--oneliner", "show", "job", second]).stdout
        assert "ArrayTaskId=0-98%3" in shown or "ArrayTaskThrottle=3" in shown, shown
        assert f"Dependency=afterany:{first}" in shown, shown
        head = devcluster.client().run(["scontrol", "--oneliner", "show", "job", first]).stdout
        assert "ArrayTaskThrottle=3" in head, head
        points = sorted((Path(done["run_dir"]) / "points").iterdir())
        assert len(points) == count and points[-1].name == f"{count - 1:04d}"
    finally:
        user.ok("cancel", "--study", "split")
