"""Modules written elsewhere as 2-node DDP jobs on the dev cluster, resubmitted to resume."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.cluster.test_training_jobs import finished, submit

from .helpers import epoch_line_metrics, epochs_in

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

BORING = "lightning.pytorch.demos.boring_classes"
# 2 nodes x 2 tasks on the local profile.
WORLD = 4


def run_twice(
    dc: DevClusterHandle, project: Path, *settings: str
) -> list[tuple[str, dict[str, Any]]]:
    """Train 2 epochs in one job, then 3 in a second job on the same run directory."""
    run_dir = project / "run"
    results = []
    for epochs in (2, 3):
        job = submit(dc, project, "--profile", "local", "--nodes", "2", "--time", "5", "--",
                     "python", "-m", "hpctrain.trainer", "--task", "custom",
                     "--run-dir", str(run_dir), "--max-epochs", str(epochs),
                     *(f"--set={s}" for s in settings))
        state, log = finished(dc, job)
        assert state == "COMPLETED", log + Path(str(job["stderr"])).read_text()
        results.append((log, json.loads((run_dir / "metrics.json").read_text())))
    return results


def check_run(runs: list[tuple[str, dict[str, Any]]], names: list[str], samples: int,
              lrs: list[Any]) -> None:
    """Both jobs: the logged names only, global samples, each epoch's rate, resume at epoch 3."""
    (first_log, _), (second_log, metrics) = runs
    assert epochs_in(first_log) == [1, 2] and epochs_in(second_log) == [3]
    assert "continuing at epoch 3" in second_log
    assert f"world_size={WORLD} nodes=2 devices_per_node=2" in first_log
    lines = epoch_line_metrics(first_log) + epoch_line_metrics(second_log)
    assert [list(line) for line in lines] == [names] * 3
    assert "nan" not in "".join(f"{v}" for line in lines for v in line.values())
    assert metrics["first_epoch"] == 3 and [e["epoch"] for e in metrics["epochs"]] == [1, 2, 3]
    assert metrics["logged_metrics"] == names
    for record, line, lr in zip(metrics["epochs"], lines, lrs, strict=True):
        assert list(record["metrics"]) == names
        assert record["samples"] == samples
        assert record["learning_rate"] == pytest.approx(lr)
        for name in names:
            assert float(line[name]) == pytest.approx(record["metrics"][name], rel=1e-3, abs=1e-4)


def test_boring_model_as_a_two_node_job(devcluster: DevClusterHandle, tmp_path: Path) -> None:
    """The issue's job: BoringModel logs nothing, batches 1 sample, SGD 0.1 with StepLR."""
    runs = run_twice(devcluster, tmp_path, f"custom.module={BORING}:BoringModel",
                     f"custom.datamodule={BORING}:BoringDataModule")
    log = runs[0][0]
    assert f"batch_size=1 per device, effective_batch_size={WORLD} learning_rate=0.1 (SGD" in log
    # 64 training samples split over the ranks by Lightning's DistributedSampler.
    check_run(runs, ["loss"], 64, [0.1, 0.01, 0.001])
    metrics = runs[1][1]
    assert metrics["batch_size_per_device"] == 1 and metrics["effective_batch_size"] == WORLD
    assert metrics["best_val_metric"] is None and not (tmp_path / "run" / "best.ckpt").exists()
    assert "train_loss" not in log and "val_acc" not in log


def test_two_optimizers_as_a_two_node_job(devcluster: DevClusterHandle, tmp_path: Path) -> None:
    """A user package next to the job: two optimizers, log_dict, a validation accuracy."""
    shutil.copytree(Path(__file__).parent / "custom_pkg", tmp_path / "custom_pkg")
    runs = run_twice(devcluster, tmp_path, "custom.module=custom_pkg.styles:TwoOptimizers",
                     "custom.datamodule=custom_pkg.blobs:BlobData", "trainer.batch_size=32",
                     "trainer.find_unused_parameters=true")
    log = runs[0][0]
    assert f"batch_size=32 per device, effective_batch_size={32 * WORLD} " in log
    assert "learning_rate=0.05,0.01 (SGD, Adam from configure_optimizers)" in log
    check_run(runs, ["loss_a", "loss_b", "val_acc"], 256, [[0.05, 0.01]] * 3)
    metrics = runs[1][1]
    assert metrics["best_val_metric"] == "val_acc" and (tmp_path / "run" / "best.ckpt").is_file()
