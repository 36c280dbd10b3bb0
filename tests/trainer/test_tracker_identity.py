"""One tracker run across every start of a run directory (issue 54): the id kept in
tracker-run.json, the loggers' steps only growing, a rerun naming the run it came from."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
import torch

from hpctrain.errors import ConfigError
from hpctrain.submission.rerun import rerun_origin
from hpctrain.trainconfig.load import load_config
from hpctrain.trainer.loggers import MLFLOW_RUN_KEY, LogStart, build_loggers
from hpctrain.trainer.resume import logged_steps
from hpctrain.trainer.runner import run_training
from hpctrain.trainer.signals import TrainingStopped
from hpctrain.trainer.tracker import (
    begin_start,
    read_tracker_run,
    start_tracker_run,
    trim_csv,
    valid_run_id,
)
from hpctrain.trainsettings.sections import LoggingSection
from hpctrain.values.rundir import RunDir

from .custom_pkg.blobs import BlobClassifier
from .test_trainer_stop import _At


class StepLogged(BlobClassifier):
    """Logs its loss at every training step too: a resumed run's rows are exact to the step.

    Not in validation: Lightning counts a validation step's rows by the validation batches
    since the process started, which starts over with every start of a run.
    """

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
                      ) -> torch.Tensor:
        loss = super().training_step(batch, batch_idx)
        self.log("batch_loss", loss)
        return loss


PER_STEP = [f"custom.module={__name__}:StepLogged", "custom.datamodule=tests.trainer.custom_pkg."
            "blobs:BlobData", "trainer.max_epochs=3", "trainer.batch_size=32",
            "trainer.stop_check_every_n_steps=3", "logging.every_n_steps=1"]


def test_the_first_start_makes_the_id_and_every_later_one_keeps_it() -> None:
    first = begin_start({}, {"SLURM_JOB_ID": "7"}, None)
    assert valid_run_id(first["id"]) and len(first["starts"]) == 1
    second = begin_start(first, {"SLURM_JOB_ID": "7", "HPCTRAIN_ATTEMPT": "2"}, 24)
    assert second["id"] == first["id"] and second["created_at"] == first["created_at"]
    assert [s["resumed_at_step"] for s in second["starts"]] == [None, 24]
    assert second["starts"][1]["attempt"] == "2"
    # A rerun's file names its origin before its first start; the rerun gets an id of its own.
    seeded = begin_start({"rerun_of": {"job_id": "5"}, "id": "not-ours"}, {}, None)
    assert seeded["rerun_of"] == {"job_id": "5"} and valid_run_id(seeded["id"])


def test_only_rank_zero_writes_the_tracker_file(tmp_path: Path) -> None:
    path = tmp_path / "tracker-run.json"
    assert start_tracker_run(path, False, None, {}) == {} and not path.exists()
    made = start_tracker_run(path, True, None, {})
    assert read_tracker_run(path) == made
    assert start_tracker_run(path, False, 3, {})["id"] == made["id"]
    assert len(read_tracker_run(path)["starts"]) == 1
    path.write_text("{torn")
    assert read_tracker_run(path) == {}


def test_trim_csv_drops_the_steps_trained_again(tmp_path: Path) -> None:
    path = tmp_path / "metrics.csv"
    assert trim_csv(path, 3) == 0  # no file yet
    rows = [["epoch", "step", "loss"], ["0", "1", "0.5"], ["0", "2", "0.4"], ["1", "3", "0.3"],
            ["1", "4", ""]]
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    assert trim_csv(path, 3) == 2
    assert path.read_bytes() == b"epoch,step,loss\r\n0,1,0.5\r\n0,2,0.4\r\n"
    assert trim_csv(path, 3) == 0


def test_logged_steps_counts_a_batch_end_save_whole() -> None:
    at_epoch_end = {"epoch_loop.state_dict": {"_batches_that_stepped": 12},
                    "epoch_loop.batch_progress": {"total": dict.fromkeys(
                        ("ready", "started", "processed", "completed"), 12)}}
    assert logged_steps(at_epoch_end) == 12
    at_batch_end = {"epoch_loop.state_dict": {"_batches_that_stepped": 16},
                    "epoch_loop.batch_progress": {"total": {
                        "ready": 17, "started": 17, "processed": 17, "completed": 16}}}
    assert logged_steps(at_batch_end) == 17
    assert logged_steps({}) == 0


def test_a_tracker_asked_for_but_not_possible_is_refused_with_the_fix(tmp_path: Path) -> None:
    for name, env in (("wandb", {"WANDB_API_KEY": "k"}), ("mlflow", {})):
        if importlib.util.find_spec(name) is not None:
            continue
        with pytest.raises(ConfigError) as e:
            build_loggers(LoggingSection(**{name: True}), tmp_path, "spiral", env=env)
        assert e.value.what == f"logging.{name} is true, but {name} is not installed"
        assert f"set logging.{name}: auto" in (e.value.fix or "")
    # auto: only where installed and configured; the CSV logger always.
    loggers = build_loggers(LoggingSection(tensorboard=False), tmp_path, "spiral", env={})
    assert [type(x).__name__ for x in loggers] == ["ResumableCSVLogger"]


def test_log_start_takes_the_ids_from_the_tracker_file() -> None:
    start = LogStart.of({"id": "a" * 32, MLFLOW_RUN_KEY: "m1"}, 5, True)
    assert (start.run_id, start.mlflow_run_id, start.resumed_at) == ("a" * 32, "m1", 5)
    assert LogStart.of({"id": 3}, None, False) == LogStart(None, None, False, None)


def _csv_rows(run: Path) -> list[dict[str, str]]:
    with open(run / "csv" / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def _by_step(rows: list[dict[str, str]]) -> list[tuple[int, str]]:
    """Each (step, metric) a row holds, in file order."""
    return [(int(r["step"]), k) for r in rows for k, v in r.items()
            if v and k not in ("step", "epoch")]


def _crash() -> None:
    raise RuntimeError("killed")


# A safe stop mid-epoch (its checkpoint covers the batch it stopped after) and a crash in the
# second epoch (the first epoch's checkpoint covers nothing of it: its rows are logged again).
@pytest.mark.parametrize(("action", "stopped"), [
    (lambda: os.kill(os.getpid(), signal.SIGUSR1), TrainingStopped), (_crash, RuntimeError)])
def test_a_resumed_run_logs_each_step_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], action: Any,
    stopped: type[BaseException],
) -> None:
    config = load_config(task="custom", overrides=PER_STEP)
    run = tmp_path / "run"
    with pytest.raises(stopped):
        run_training(config, run, callbacks=[_At(action, epoch=1, batch=2)])
    first = read_tracker_run(RunDir(run).tracker_run)
    logged = _by_step(_csv_rows(run))
    run_training(config, run)
    run_training(config, tmp_path / "straight")
    tracker = read_tracker_run(RunDir(run).tracker_run)
    assert tracker["id"] == first["id"] and len(tracker["starts"]) == 2
    resumed_at = tracker["starts"][1]["resumed_at_step"]
    # The crash's rows past its checkpoint were dropped, and logged again by the resumed run.
    assert any(step >= resumed_at for step, _ in logged) == (stopped is RuntimeError), logged
    rows = _by_step(_csv_rows(run))
    straight = _by_step(_csv_rows(tmp_path / "straight"))
    if stopped is TrainingStopped:
        # The safe stop leaves in the hook after the batch it saved at, before Lightning logs
        # that batch: the checkpoint covers it, so no later start logs it either.
        straight.remove((resumed_at - 1, "batch_loss"))
    assert rows == straight
    assert len(rows) == len(set(rows))
    capsys.readouterr()


def _tensorboard_steps(run: Path) -> dict[str, list[int]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    return {tag: [e.step for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None,
                    reason="tensorboard is not installed")
def test_tensorboard_hides_the_steps_trained_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = load_config(task="custom", overrides=[*PER_STEP, "logging.tensorboard=true"])
    run = tmp_path / "run"
    # Killed in its second epoch: the first epoch's checkpoint covers none of its steps.
    with pytest.raises(RuntimeError):
        run_training(config, run, callbacks=[_At(_crash, epoch=1, batch=2)])
    run_training(config, run)
    run_training(config, tmp_path / "straight")
    # The steps TensorBoard shows are a run's that never stopped (Lightning logs `epoch` with
    # both the validation and the training metrics: twice a step, in any run).
    assert _tensorboard_steps(run) == _tensorboard_steps(tmp_path / "straight")
    capsys.readouterr()


def test_a_rerun_names_the_run_it_came_from(tmp_path: Path) -> None:
    tracker: dict[str, Any] = {"id": "b" * 32, "starts": []}
    text = rerun_origin("41", tmp_path / "old", json.dumps(tracker))
    assert json.loads(text) == {"rerun_of": {"job_id": "41", "run_dir": str(tmp_path / "old"),
                                             "tracker_run_id": "b" * 32}}
    # A job from before tracker files, or a torn one: the job and its directory still.
    assert json.loads(rerun_origin("41", tmp_path, "{torn"))["rerun_of"]["tracker_run_id"] is None
    started = begin_start(json.loads(text), {}, None)
    assert started["id"] != "b" * 32 and started["rerun_of"]["tracker_run_id"] == "b" * 32
