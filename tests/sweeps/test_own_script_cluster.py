"""A sweep of a researcher's own script on the dev cluster (issue 52): the example's argparse
DDP program over `--lr {lr}`, 2 points on 2 nodes each (gloo, CPUs); its metrics, written by
progress.log_metrics, rank the points in `sweep-report`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import DevClusterHandle
from tests.options.helpers import User
from tests.waits import wait_for

pytestmark = [pytest.mark.cluster]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own_script" / "train.py"


def test_a_sweep_of_one_s_own_script_is_ranked_by_its_own_metric(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    user = User(devcluster, tmp_path)
    done = user.json("sweep", "--profile", "local", "--nodes", "2", "--gpus-per-node", "1",
                     "--time", "3", "--no-monitor", "--grid", "lr=0.1,0.01", "--name", "own",
                     "--json", "--", "python", str(EXAMPLE), "--epochs", "2", "--lr", "{lr}")
    row = wait_for(lambda: [j for j in user.jobs() if j["name"].startswith("sweep own")],
                   300, "the sweep to end", until=lambda r: len(r) == 1 and r[0]["terminal"])
    report = user.json("sweep-report", "own", "--json", "--metric", "final_loss")
    assert row[0]["state"] == "COMPLETED", (row, report)
    # final_loss is metrics.json's key for the latest `loss`: the epochs' `loss` ranks them.
    assert (report["metric"], report["mode"]) == ("loss", "min")
    finals = [p["final"] for p in report["points"]]
    assert all(isinstance(f, float) for f in finals) and finals[0] < finals[1], report
    assert [p["epochs"] for p in report["points"]] == [2, 2]
    assert report["best"]["point"] == 0 and report["best"]["settings"] == {"lr": "0.1"}
    assert Path(done["run_dir"], "sweep-report.json").is_file()
