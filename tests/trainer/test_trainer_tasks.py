"""Every task of the registry trains an epoch and reports what its declaration says (the
registry itself: tests/unit/test_tasks.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hpctrain.tasks import registry
from hpctrain.tasks.parts.datasets.idx import write_idx

from .helpers import epoch_line_metrics

# What the test module of task custom logs (custom_pkg/blobs.py), with the loss its
# training_step returns.
BLOB_METRICS = {"loss", "train_loss", "val_loss", "val_acc"}


def _idx_files(directory: Path) -> None:
    rng = np.random.default_rng(0)
    directory.mkdir()
    for prefix, n in (("train", 128), ("t10k", 64)):
        images = rng.integers(0, 256, (n, 28, 28), np.uint8)
        write_idx(directory / f"{prefix}-images-idx3-ubyte", images)
        write_idx(directory / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, n, np.uint8))


def _settings(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each task's overrides for a quick epoch: a new task adds its line here."""
    if name in ("mnist", "fashionmnist"):
        _idx_files(tmp_path / name)
        return [f"data.dir={tmp_path / name}", "data.num_workers=0"]
    if name == "custom":
        monkeypatch.syspath_prepend(str(Path(__file__).parent))
        return ["custom.module=custom_pkg.blobs:BlobClassifier",
                "custom.datamodule=custom_pkg.blobs:BlobData"]
    # The train fixture makes spiral tiny by itself.
    return {"spiral": [], "synthcifar": ["data.samples=640"]}[name]


@pytest.mark.parametrize("name", registry.names())
def test_each_task_trains_an_epoch_and_reports_what_it_declares(
    name: str, train: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = registry.get(name)
    overrides = [*_settings(name, tmp_path, monkeypatch), "trainer.max_epochs=1"]
    out, summary = train(tmp_path / "run", *overrides, task=name)
    (reported,) = epoch_line_metrics(out)
    if task.builtin_step:
        assert list(reported) == list(task.metrics)
        assert "samples/s counts" not in out
    else:
        assert not task.metrics and set(reported) == BLOB_METRICS
        assert "samples/s counts len(batch)" in out
    best = task.best[0] if task.best else "val_loss"
    assert summary["best_val_metric"] == best and summary[f"final_{best}"] is not None
    assert (tmp_path / "run" / "best.ckpt").is_file()


def test_synthcifar_learns_well_above_chance_in_two_epochs(train: Any, tmp_path: Path) -> None:
    out, summary = train(
        tmp_path / "run", "data.samples=2000", "trainer.max_epochs=2", task="synthcifar"
    )
    first, second = (float(m["val_acc"]) for m in epoch_line_metrics(out))
    # Chance is 0.1 for its ten classes.
    assert second >= 0.4, out
    assert summary["final_val_acc"] == pytest.approx(second, abs=1e-4)
    assert first > 0.1
