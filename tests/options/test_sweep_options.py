"""Each option of `hpctrain sweep` and `sweep-report` seen where it acts: in the planned arrays
and scripts (dry runs on the dev cluster, which answer `scontrol show config`), in real points
(--points, --chain, --seed, --set, --config), and in the report (--metric)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, DevClusterHandle
from tests.options.helpers import User
from tests.waits import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture
def user(devcluster: DevClusterHandle, tmp_path: Path) -> User:
    return User(devcluster, tmp_path)


def _script_lines(dry: dict[str, Any]) -> list[str]:
    return str(dry["script_text"]).splitlines()


def test_job_options_reach_every_array_script(user: User, tmp_path: Path) -> None:
    venv = tmp_path / "job env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    dry = user.json(
        "sweep", "--profile", "local", "--partition", "debug", "--nodes", "2",
        "--gpus-per-node", "1", "--cpus-per-task", "1", "--mem", "500", "--time", "3",
        "--account", "hpctrain-test", "--qos", "normal", "--job-name", "lrs",
        "--launcher", "torchrun", "--env", "OPT_X=1", "--sbatch-arg=--mail-type=NONE",
        "--python-env", str(venv), "--monitor-interval", "7", "--grace", "30",
        "--no-requeue", "--grid", "optim.lr=0.1,0.2,0.3", "--max-array-size", "2",
        "--max-parallel", "1", "--name", "dry", "--dry-run", "--json",
        "--", "python", "-m", "hpctrain.trainer", "--task", "spiral")
    lines = _script_lines(dry)
    for expected in ("#SBATCH --partition=debug", "#SBATCH --nodes=2", "#SBATCH --mem=500",
                     "#SBATCH --cpus-per-task=1", "#SBATCH --time=00:03:00",
                     "#SBATCH --account=hpctrain-test", "#SBATCH --qos=normal",
                     "#SBATCH --job-name=lrs", "#SBATCH --mail-type=NONE",
                     "#SBATCH --signal=B:USR1@30", "#SBATCH --no-requeue",
                     "#SBATCH --array=0-1%1"):
        assert expected in lines, expected
    assert any("torchrun" in ln for ln in lines)
    assert "export OPT_X=1" in lines
    assert any(str(venv) in ln for ln in lines)
    assert any("--interval 7" in ln for ln in lines)
    # --max-array-size 2: three points are two arrays, the second of one point.
    assert [a["array"] for a in dry["arrays"]] == ["0-1%1", "0-0%1"]
    assert dry["points"] == 3 and dry["max_array_size"] == 2


def test_constraint_reaches_the_script(user: User) -> None:
    profile = yaml.safe_load((REPO / "cluster_profiles" / "local.yaml").read_text())
    profile["partitions"][0]["constraints"] = [{"name": "fast", "description": "none has it"}]
    (user.cwd / "my.yaml").write_text(yaml.safe_dump({**profile, "name": "withfeature"}))
    dry = user.json("sweep", "--profile", str(user.cwd / "my.yaml"), "--constraint", "fast",
                    "--grid", "k=1,2", "--dry-run", "--json", "--", "true")
    assert "#SBATCH --constraint=fast" in _script_lines(dry)


def test_trainer_options_and_monitor(user: User) -> None:
    (user.cwd / "base.yaml").write_text("task: spiral\ntrainer:\n  max_epochs: 3\n")
    dry = user.json("sweep", "--profile", "local", "--config", "base.yaml",
                    "--global-batch", "64", "--max-device-batch", "32", "--monitor",
                    "--sample", "optim.lr=loguniform:1e-3,1e-1", "--samples", "4",
                    "--seed", "11", "--dry-run", "--json")
    assert dry["points"] == 4 and dry["keys"] == ["optim.lr"]
    again = user.json("sweep", "--profile", "local", "--config", "base.yaml",
                      "--sample", "optim.lr=loguniform:1e-3,1e-1", "--samples", "4",
                      "--seed", "11", "--dry-run", "--json")
    assert again["sample"] == dry["sample"]
    command = dry["plan"]["command"]
    assert "trainer.global_batch=64" in command and "trainer.max_device_batch=32" in command
    assert any("hpctrain.monitor" in ln for ln in _script_lines(dry))
    quiet = user.json("sweep", "--profile", "local", "--task", "spiral", "--max-epochs", "1",
                      "--no-monitor", "--requeue", "--grid", "trainer.batch_size=16,32",
                      "--dry-run", "--json")
    assert not any("hpctrain.monitor sample" in ln for ln in _script_lines(quiet))
    assert "trainer.max_epochs=1" in quiet["plan"]["command"]


def test_points_file_chain_and_metric_in_real_points(user: User) -> None:
    (user.cwd / "points.csv").write_text("optim.lr,trainer.batch_size\n0.05,32\n0.01,64\n")
    done = user.json("sweep", "--profile", "local", "--task", "spiral", "--max-epochs", "1",
                     "--set", "data.samples=1000", "--points", "points.csv", "--chain", "2",
                     "--time", "5", "--no-monitor", "--name", "chained", "--json")
    assert len(done["arrays"][0]) == 2  # the array and its second segment (aftercorr)
    row = wait_for(lambda: [j for j in user.jobs() if "chained" in j["name"]][0], 600,
                   "both points' chains to end", until=lambda r: r["terminal"])
    assert "2/2 done" in row["name"], row
    points = user.jobs("--study", "chained")
    assert len(points) == 4 and {p["state"] for p in points} == {"COMPLETED"}
    report = user.json("sweep-report", "chained", "--metric", "val_loss", "--json")
    assert report["metric"] == "val_loss" and report["mode"] == "min"
    assert [p["settings"] for p in report["points"]] == [
        {"optim.lr": "0.05", "trainer.batch_size": "32"},
        {"optim.lr": "0.01", "trainer.batch_size": "64"}]
    assert report["best"]["best"] == min(p["best"] for p in report["points"])
    # The second segment found the training complete: the point trained once, 1 epoch.
    for p in report["points"]:
        assert p["epochs"] == 1
        assert (Path(p["run_dir"]) / "training-complete").exists()
    shown = json.loads(user.ok("status", "--study", "chained", "--json").stdout)
    assert len(shown["jobs"]) == 4
