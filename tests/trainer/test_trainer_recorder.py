"""The recorder's checkpoint state: what earlier versions saved still resumes, and a data module
declares its batching through a protocol rather than by the task's name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpctrain.trainer.facts import DeclaresBatching
from hpctrain.trainer.recorder.console import Console
from hpctrain.trainer.recorder.run import STATE_KEY, RunRecorder
from hpctrain.trainer.recorder.writer import RunIdentity
from hpctrain.trainer.records import PartialEpoch
from hpctrain.trainsettings.sections import CheckpointSection

# The "hpctrain.RunRecorder" entry of a checkpoint saved mid-epoch by the recorder before it
# was split into parts (a single class in hpctrain/trainer/recorder.py).
SAVED_BEFORE = {
    "task": "spiral",
    "best_score": 0.25,
    "best_epoch": 1,
    "best_metric": "val_loss",
    "best_mode": "min",
    "partial_epoch": {
        "epoch": 2, "samples": 1280, "uncounted": 0, "train_time_s": 0.75,
        "loss": [640.0, 1280.0], "step_means": {"lr_epoch": (12.8, 1280.0)},
    },
}


def _recorder(tmp_path: Path, **checkpoint: Any) -> RunRecorder:
    identity = RunIdentity(task="spiral", run_dir=tmp_path, launch="local", slurm_job_id=None)
    console = Console(lambda trainer, facts: "", epoch_lines=False)
    return RunRecorder(identity, CheckpointSection(**checkpoint), console)


def test_a_checkpoint_of_the_earlier_recorder_resumes(tmp_path: Path) -> None:
    recorder = _recorder(tmp_path)
    assert recorder.state_key == STATE_KEY == "hpctrain.RunRecorder"
    recorder.load_state_dict(SAVED_BEFORE)
    assert (recorder.best.choice.metric, recorder.best.choice.mode) == ("val_loss", "min")
    assert (recorder.best.score, recorder.best.epoch) == (0.25, 1)
    assert recorder._partial == PartialEpoch(2, 1280, 0, 0.75, (640.0, 1280.0),
                                             {"lr_epoch": (12.8, 1280.0)})
    # Saved again at an epoch's end, the entry has the same keys as before.
    assert recorder.state_dict() == {**SAVED_BEFORE, "partial_epoch": None}


def test_a_checkpoint_without_the_metric_followed_val_acc(tmp_path: Path) -> None:
    recorder = _recorder(tmp_path)
    recorder.load_state_dict({"task": "spiral", "best_score": 0.9, "best_epoch": 3})
    assert (recorder.best.choice.metric, recorder.best.choice.mode) == ("val_acc", "max")
    assert recorder.best.score == 0.9 and recorder._partial is None
    # A config that now names another metric starts its choice over.
    other = _recorder(tmp_path, monitor="train_loss")
    other.load_state_dict(SAVED_BEFORE)
    assert other.best.score is None and other.best.choice.metric is None


class _Declares:
    batches_per_call = 8
    data_on_device = True


class _Chunked:
    chunk, resident = 8, True  # the built-in modules' own names: not a declaration


def test_batching_is_read_only_from_a_data_module_that_declares_it(
    train: Any, tmp_path: Path
) -> None:
    assert isinstance(_Declares(), DeclaresBatching)
    assert not isinstance(_Chunked(), DeclaresBatching)
    _, summary = train(tmp_path / "run", "trainer.max_epochs=1", "trainer.batches_per_call=4")
    assert summary["batches_per_call"] == 4 and summary["data_on_device"] is True
    assert summary["settings"]["trainer"]["batches_per_call"] == 4
