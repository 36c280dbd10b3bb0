"""The safe stop in one process: signals and stop files end training with its checkpoint on disk,
and the next start continues exactly where it stopped (issue 11)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch

from hpctrain.trainconfig.load import load_config
from hpctrain.trainer.runner import run_training
from hpctrain.trainer.signals import EXIT_REQUEUE, TrainingStopped
from hpctrain.values.rundir import RunDir

from .helpers import ONE_BATCH_PER_CALL, TINY_SPIRAL, epochs_in

# 13 training batches per epoch; a check every 2 batches.
SPIRAL = [
    *TINY_SPIRAL, ONE_BATCH_PER_CALL, "trainer.max_epochs=3", "trainer.stop_check_every_n_steps=2"
]
FULL_EPOCH = 3277


class _At(L.Callback):
    """Does `action` once, after batch `batch` of epoch `epoch` (0-based), or at another hook."""

    def __init__(self, action: Any, epoch: int = 1, batch: int = 4, hook: str = "batch") -> None:
        self.action, self.epoch, self.batch, self.hook = action, epoch, batch, hook
        self.done = False

    def _fire(self) -> None:
        if not self.done:
            self.done = True
            self.action()

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if self.hook == "batch" and trainer.current_epoch == self.epoch and args[-1] == self.batch:
            self._fire()

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.hook == "validation" and trainer.current_epoch == self.epoch:
            self._fire()

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.hook == "fit_start":
            self._fire()


class _FitStarted(L.Callback):
    """Notes when fit began: the trainer has taken its segment's start (the time before which a
    stop file counts as stale) by then."""

    at: float | None = None

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.at = time.time()


def _signal(name: str) -> Any:
    return lambda: os.kill(os.getpid(), getattr(signal, name))


def _stop_then_resume(
    run: Path, action: Any, capsys: pytest.CaptureFixture[str], overrides: list[str] = SPIRAL,
    task: str = "spiral", also: tuple[L.Callback, ...] = (), **at: Any,
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Train until `action` stops it, check the stop, train again; (stop end, metrics, output)."""
    config = load_config(task=task, overrides=overrides)
    called = time.time()
    with pytest.raises(TrainingStopped) as stopped:
        run_training(config, run, callbacks=[*also, _At(action, **at)])
    returned = time.time()
    assert stopped.value.exit_code == EXIT_REQUEUE
    assert (run / "last.ckpt").is_file() and RunDir(run).stop_saved.is_file()
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["status"] == "stopped"
    end = metrics["restarts"][-1]["end"]
    assert end["how"] == "stopped"
    # Asked for and saved within this call, in that order (how fast is benchmarks' business).
    assert called <= end["requested_at"] <= end["checkpoint_at"] <= returned
    assert end["signal_to_checkpoint_s"] == end["checkpoint_at"] - end["requested_at"]
    capsys.readouterr()
    summary = run_training(config, run)
    out = capsys.readouterr().out
    assert [e["epoch"] for e in summary["epochs"]] == [1, 2, 3]
    assert summary["status"] == "completed" and (run / "training-complete").is_file()
    assert not RunDir(run).stop_saved.exists()
    return end, summary, out


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=False)["state_dict"]


def _same_weights(a: Path, b: Path) -> bool:
    wa, wb = _weights(a), _weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_sigusr1_mid_epoch_stops_and_resumes_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    end, summary, out = _stop_then_resume(run, _signal("SIGUSR1"), capsys)
    # Asked for after batch 5 of epoch 2 (the 18th): the check after that same batch acts on it.
    assert end["reason"] == "SIGUSR1" and end["epoch"] == 2 and end["mid_epoch"]
    assert end["batches_done_in_epoch"] == 5
    assert "continuing at epoch 2 (saved mid-epoch" in out and epochs_in(out) == [2, 3]
    assert [e["samples"] for e in summary["epochs"]] == [FULL_EPOCH] * 3
    first, second = summary["restarts"]
    assert first["end"] == end and second["previous_end"] == end
    assert second["resumed_from"]["epoch"] == 2 and second["resumed_from"]["mid_epoch"]
    assert second["end"]["how"] == "completed"
    # Bit for bit the same model as a run that was never interrupted.
    run_training(load_config(task="spiral", overrides=SPIRAL), tmp_path / "straight")
    assert _same_weights(run / "last.ckpt", tmp_path / "straight" / "last.ckpt")


def test_stop_file_and_sigterm_stop_the_same_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The segment starts when this process's trainer does, not at a SLURM job's start.
    for name in ("HPCTRAIN_SEGMENT_START", "SLURM_JOB_START_TIME"):
        monkeypatch.delenv(name, raising=False)
    fit = _FitStarted()
    written: list[float] = []

    def write_stop_file() -> None:
        # Stamped with the moment fit began: after the segment's start, so not stale, and
        # earlier than now, so the recorded delay shows it came from the file.
        assert fit.at is not None
        RunDir(tmp_path / "a").stop_requested.write_text(f"USR1 {fit.at:.6f}\n")
        written.append(time.time())

    end, summary, _ = _stop_then_resume(tmp_path / "a", write_stop_file, capsys, also=(fit,))
    assert end["reason"] == "stop file" and end["mid_epoch"]
    assert end["requested_at"] == pytest.approx(fit.at, abs=1e-6)
    assert end["signal_to_checkpoint_s"] >= written[0] - end["requested_at"]
    assert [e["samples"] for e in summary["epochs"]] == [FULL_EPOCH] * 3

    end, summary, _ = _stop_then_resume(tmp_path / "b", _signal("SIGTERM"), capsys, epoch=0)
    assert end["reason"] == "SIGTERM" and end["epoch"] == 1 and end["mid_epoch"]
    assert [e["samples"] for e in summary["epochs"]] == [FULL_EPOCH] * 3


def test_signal_during_validation_stops_at_the_epoch_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    end, summary, out = _stop_then_resume(
        tmp_path / "run", _signal("SIGUSR1"), capsys, epoch=0, hook="validation"
    )
    # Epoch 1 finished, validation included, and counts as done: the next start begins epoch 2.
    assert end["epoch"] == 1 and not end["mid_epoch"]
    assert "continuing at epoch 2" in out and "mid-epoch" not in out
    assert epochs_in(out) == [2, 3]
    assert [e["samples"] for e in summary["epochs"]] == [FULL_EPOCH] * 3


def test_signal_before_the_first_step_still_ends_safely(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    end, summary, _ = _stop_then_resume(
        tmp_path / "run", _signal("SIGUSR1"), capsys, hook="fit_start"
    )
    assert end["epoch"] == 1 and end["batches_done_in_epoch"] == 2
    assert [e["samples"] for e in summary["epochs"]] == [FULL_EPOCH] * 3


def test_custom_module_stops_and_resumes_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    overrides = [
        "custom.module=custom_pkg.blobs:BlobClassifier",
        "custom.datamodule=custom_pkg.blobs:BlobData",
        "trainer.max_epochs=3",
        "trainer.batch_size=32",
        "trainer.stop_check_every_n_steps=3",
    ]
    run = tmp_path / "run"
    end, summary, _ = _stop_then_resume(
        run, _signal("SIGUSR1"), capsys, overrides, task="custom", batch=2
    )
    assert end["epoch"] == 2 and end["mid_epoch"] and end["batches_done_in_epoch"] == 4
    assert [e["samples"] for e in summary["epochs"]] == [256] * 3
    # A shuffling DataLoader in one process: the interrupted epoch's order is drawn again.
    run_training(load_config(task="custom", overrides=overrides), tmp_path / "straight")
    assert _same_weights(run / "last.ckpt", tmp_path / "straight" / "last.ckpt")


def test_stale_stop_file_is_ignored_and_removed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    RunDir(run).stop_requested.write_text(f"USR1 {time.time() - 3600:.6f}\n")
    RunDir(run).stop_saved.write_text("left from an earlier segment\n")
    summary = run_training(load_config(task="spiral", overrides=SPIRAL), run)
    assert summary["status"] == "completed" and summary["epochs_completed"] == 3
    assert not RunDir(run).stop_requested.exists() and not RunDir(run).stop_saved.exists()


def test_complete_checkpoint_exits_at_once_and_marks_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    config = load_config(task="spiral", overrides=SPIRAL)
    run_training(config, run)
    (run / "training-complete").unlink()
    summary = run_training(config, run)
    out = capsys.readouterr().out
    assert "already holds epoch 3 of 3" in out and epochs_in(out).count(3) == 1
    assert (run / "training-complete").read_text() == "3 of 3\n"
    assert [r["end"]["how"] for r in summary["restarts"]] == ["completed", "completed"]
    assert [e["epoch"] for e in summary["epochs"]] == [1, 2, 3]


def test_a_killed_segment_is_marked_unrecorded(tmp_path: Path) -> None:
    run = tmp_path / "run"
    config = load_config(task="spiral", overrides=SPIRAL)
    run_training(config, run)
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["restarts"][-1]["end"] = None  # as if SIGKILLed before it could record its end
    (run / "metrics.json").write_text(json.dumps(metrics))
    longer = load_config(task="spiral", overrides=[*SPIRAL, "trainer.max_epochs=4"])
    summary = run_training(longer, run)
    first, second = summary["restarts"]
    assert first["end"]["how"] == "unrecorded" and second["previous_end"] == first["end"]
    assert [e["epoch"] for e in summary["epochs"]] == [1, 2, 3, 4]
