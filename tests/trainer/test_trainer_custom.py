"""Modules written elsewhere (Lightning's demos, other styles): reported as they log and run."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from hpctrain.errors import ConfigError
from hpctrain.trainer.best import BestChoice, guess_mode
from hpctrain.trainer.facts import batch_size_of

from .helpers import clean_env, epoch_line_metrics, epochs_in, run_module

BORING = "lightning.pytorch.demos.boring_classes"
BLOBS = "custom_pkg.blobs:BlobData"


@dataclass
class Case:
    """A module, its data, and what a run of it must report."""

    module: str
    datamodule: str | None
    metrics: list[str]
    batch: int
    samples: int
    lrs: list[Any]  # the learning rate each of epochs 1-3 starts with
    best: str | None
    same: tuple[str, str] | None = None  # two names that must carry the same value
    extra: list[str] = field(default_factory=list)


CASES = {
    # The issue's run: logs nothing, returns {"loss": ...}, batch 1, SGD 0.1 with StepLR.
    "boring": Case(f"{BORING}:BoringModel", f"{BORING}:BoringDataModule", ["loss"], 1, 64,
                   [0.1, 0.01, 0.001], None),
    # Manual optimization returning the loss tensor; its own loaders. Lightning steps no
    # scheduler in manual optimization, so the rate stays.
    "manual": Case(f"{BORING}:ManualOptimBoringModel", None, ["loss"], 1, 64,
                   [0.1, 0.1, 0.1], None),
    # Logs train_loss per step only; a batch sampler (4 sequences) instead of batch_size.
    "lstm": Case("custom_pkg.demos:TinyLSTM", None, ["loss", "train_loss_epoch"], 4, 24,
                 [20.0, 20.0, 20.0], None, same=("loss", "train_loss_epoch")),
    "transformer": Case("custom_pkg.demos:TinyTransformer", None, ["loss"], 1, 8,
                        [0.1, 0.1, 0.1], None),
    "two_optimizers": Case("custom_pkg.styles:TwoOptimizers", BLOBS,
                           ["loss_a", "loss_b", "val_acc"], 32, 256,
                           [[0.05, 0.01]] * 3, "val_acc"),
    "dict_step": Case("custom_pkg.styles:DictStep", BLOBS, ["loss", "val_acc"], 32, 256,
                      [0.2, 0.1, 0.05], "val_acc"),
    # on_step and on_epoch: Lightning's acc_epoch, and no acc_step.
    "forked": Case("custom_pkg.styles:ForkedLogs", BLOBS, ["loss", "acc_epoch", "val_acc"], 32, 256,
                   [0.2, 0.1, 0.05], "val_acc"),
    "per_step_only": Case("custom_pkg.styles:PerStepOnly", BLOBS,
                          ["loss", "batch_loss_epoch", "val_mse_epoch"], 32, 256,
                          [0.01, 0.01, 0.01], "val_mse_epoch", same=("loss", "batch_loss_epoch")),
    "epoch_logs": Case("custom_pkg.blobs:BlobClassifier", BLOBS,
                       ["loss", "train_loss", "val_loss", "val_acc"], 32, 256,
                       [0.01, 0.01, 0.01], "val_loss", same=("loss", "train_loss")),
}


@pytest.fixture(autouse=True)
def _test_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))


def overrides(case: Case, epochs: int) -> list[str]:
    data = [f"custom.datamodule={case.datamodule}"] if case.datamodule else []
    return [f"custom.module={case.module}", *data, f"trainer.max_epochs={epochs}",
            "trainer.batch_size=32", "data.num_workers=0"]


def check_epochs(case: Case, out: str, metrics: dict[str, Any], first: int) -> None:
    """Lines and records carry exactly the logged names, with the same values."""
    lines = epoch_line_metrics(out)
    records = [e for e in metrics["epochs"] if e["epoch"] >= first]
    assert len(lines) == len(records) > 0
    for line, record in zip(lines, records, strict=True):
        assert list(line) == case.metrics == list(record["metrics"])
        for name, value in record["metrics"].items():
            assert value is not None and line[name] != "nan"
            assert float(line[name]) == pytest.approx(value, rel=1e-3, abs=1e-4)
        if case.same:
            a, b = (record["metrics"][n] for n in case.same)
            assert a == pytest.approx(b, rel=1e-5)
        assert record["samples"] == case.samples
        assert record["learning_rate"] == pytest.approx(case.lrs[record["epoch"] - 1])


@pytest.mark.parametrize("name", list(CASES))
def test_custom_module_reports_what_it_logs_and_resumes(
    name: str, train: Any, tmp_path: Path
) -> None:
    case, run = CASES[name], tmp_path / "run"
    out, summary = train(run, *overrides(case, 2), task="custom")
    assert epochs_in(out) == [1, 2]
    check_epochs(case, out, summary, 1)
    assert summary["logged_metrics"] == case.metrics
    assert {k for k in summary if k.startswith("final_")} == {f"final_{m}" for m in case.metrics}
    assert summary["batch_size_per_device"] == case.batch == summary["effective_batch_size"]
    assert f"batch_size={case.batch} per device, effective_batch_size={case.batch} " in out
    assert summary["learning_rate"] == pytest.approx(case.lrs[0])
    assert summary["best_val_metric"] == case.best
    assert (run / "best.ckpt").is_file() == (case.best is not None)
    assert "nan" not in out.split("epochs=", 1)[1]

    out, summary = train(run, *overrides(case, 3), task="custom")
    assert "continuing at epoch 3" in out and epochs_in(out) == [3]
    assert summary["first_epoch"] == 3 and [e["epoch"] for e in summary["epochs"]] == [1, 2, 3]
    check_epochs(case, out, summary, 3)
    assert summary["best_val_metric"] == case.best


def test_issue_15_boring_model_line(train: Any, tmp_path: Path) -> None:
    """The reported run: no invented train_loss/val_loss/val_acc, batch 1 and lr 0.1."""
    out, summary = train(tmp_path / "run", *overrides(CASES["boring"], 1), task="custom")
    assert "batch_size=1 per device, effective_batch_size=1 learning_rate=0.1 (SGD" in out
    assert "StepLR" in out and "samples/s counts len(batch)" in out
    assert "val_acc" not in out and "train_loss" not in out
    assert "note: the module logs no validation metric; only last.ckpt is saved" in out
    assert "final_val_acc" not in summary and summary["best_note"]


def test_monitor_not_logged_warns_at_the_first_validation(train: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    out, summary = train(run, *overrides(CASES["dict_step"], 2), "checkpoint.monitor=val_f1",
                         task="custom")
    warning = "warning: checkpoint.monitor 'val_f1' is not logged by the module"
    assert out.count(warning) == 1 and out.index(warning) < out.index("epoch 1/2")
    assert "(it logs: loss, val_acc)" in out
    assert summary["status"] == "completed" and summary["best_val_metric"] is None
    assert (run / "last.ckpt").is_file() and not (run / "best.ckpt").exists()


def test_configured_monitor_and_mode(train: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    out, summary = train(run, *overrides(CASES["epoch_logs"], 2), "checkpoint.monitor=val_acc",
                         "checkpoint.mode=max", task="custom")
    assert "best.ckpt follows" not in out  # nothing guessed, nothing to say
    assert summary["best_val_metric"] == "val_acc" and summary["best_val_mode"] == "max"
    best = max(e["metrics"]["val_acc"] for e in summary["epochs"])
    assert summary["best_val_score"] == pytest.approx(best)
    out, _ = train(run, *overrides(CASES["epoch_logs"], 2), "checkpoint.monitor=train_loss",
                   task="custom", resume="never")
    assert "best.ckpt follows train_loss (min, guessed from the name" in out


def test_module_without_data_is_a_clear_error(train: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="has no train_dataloader"):
        train(tmp_path / "run", "custom.module=custom_pkg.styles:DictStep", task="custom")


@pytest.mark.parametrize(
    ("batch", "size"),
    [
        (torch.zeros(5, 3), 5),
        ((torch.zeros(4, 2), torch.zeros(4)), 4),
        ([{"x": torch.zeros(3, 1)}, torch.zeros(9)], 3),
        ({"ids": torch.zeros(6, 8), "mask": torch.ones(6, 8)}, 6),
        ((["a b", "c", "d e f"], torch.zeros(3)), 3),
        (torch.tensor(1.0), 1),
        (object(), None),
        ({"meta": "text"}, None),
    ],
)
def test_batch_size_of(batch: Any, size: int | None) -> None:
    assert batch_size_of(batch) == size


def test_metrics_json_has_no_invented_names(train: Any, tmp_path: Path) -> None:
    _, summary = train(tmp_path / "run", *overrides(CASES["transformer"], 1), task="custom")
    written = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert written["logged_metrics"] == ["loss"] == list(written["epochs"][0]["metrics"])
    assert not {"final_train_loss", "final_val_loss", "final_val_acc"} & set(written)
    assert written["samples_counted_as"].startswith("len(batch)")


def test_epoch_split_by_a_stop_reports_the_whole_epoch(
    train: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The returned loss and per-step means of an epoch stopped mid-way count all its steps."""
    from hpctrain.trainconfig.load import load_config
    from hpctrain.trainer.runner import run_training
    from hpctrain.trainer.signals import TrainingStopped

    from .test_trainer_stop import _At, _signal

    settings = [*overrides(CASES["per_step_only"], 2), "trainer.stop_check_every_n_steps=2"]
    config = load_config(task="custom", overrides=settings)
    with pytest.raises(TrainingStopped):
        run_training(config, tmp_path / "split", callbacks=[_At(_signal("SIGUSR1"), batch=2)])
    assert "stop:" in capsys.readouterr().out
    out, split = train(tmp_path / "split", *settings, task="custom")
    assert "saved mid-epoch" in out and epochs_in(out) == [2]
    _, straight = train(tmp_path / "straight", *settings, task="custom")
    for a, b in zip(split["epochs"], straight["epochs"], strict=True):
        assert a["samples"] == b["samples"] == 256
        assert a["metrics"] == pytest.approx(b["metrics"], rel=1e-6)


@pytest.mark.slow
def test_two_optimizers_under_ddp_need_find_unused_parameters(tmp_path: Path) -> None:
    """Each loss uses half the parameters: DDP refuses that unless told, in hpctrain's terms."""
    args = ["--task", "custom", "--max-epochs", "1", "--set", "trainer.devices=2",
            *[f"--set={o}" for o in overrides(CASES["two_optimizers"], 1)]]
    env = clean_env({"OMP_NUM_THREADS": "1"})
    refused = run_module([*args, "--run-dir", str(tmp_path / "a")], env=env)
    assert refused.returncode == 1
    assert "Error: under DDP the module's loss left some parameters unused" in refused.stderr
    assert "trainer.find_unused_parameters=true" in refused.stderr
    assert "Traceback" not in refused.stderr

    done = run_module([*args, "--run-dir", str(tmp_path / "b"),
                       "--set", "trainer.find_unused_parameters=true"], env=env)
    assert done.returncode == 0, done.stderr
    banner = "batch_size=32 per device, effective_batch_size=64 learning_rate=0.05,0.01"
    assert banner in done.stdout
    assert [list(m) for m in epoch_line_metrics(done.stdout)] == [["loss_a", "loss_b", "val_acc"]]
    metrics = json.loads((tmp_path / "b" / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["epochs"][0]["samples"] == 256


def test_batches_it_cannot_count_make_throughput_unknown(train: Any, tmp_path: Path) -> None:
    out, summary = train(tmp_path / "run", "custom.module=custom_pkg.styles:OpaqueStep",
                         "custom.datamodule=custom_pkg.styles:OpaqueBatches",
                         "trainer.max_epochs=1", "trainer.batch_size=32", task="custom")
    assert " samples/s=unknown " in out
    assert summary["epochs"][0]["samples"] is None and summary["samples_per_s"] is None
    assert summary["batch_size_per_device"] == 32  # the loader still says its batch size


def test_metrics_of_epochs_without_validation_are_left_out(train: Any, tmp_path: Path) -> None:
    out, summary = train(tmp_path / "run", *overrides(CASES["epoch_logs"], 2),
                         "trainer.check_val_every_n_epoch=2", task="custom")
    assert [list(m) for m in epoch_line_metrics(out)] == [
        ["loss", "train_loss"], ["loss", "train_loss", "val_loss", "val_acc"]
    ]
    assert list(summary["epochs"][0]["metrics"]) == ["loss", "train_loss"]
    assert summary["best_val_metric"] == "val_loss" and summary["best_epoch"] == 2
    assert out.index("best.ckpt follows val_loss") > out.index("epoch 1/2")


@pytest.mark.parametrize(
    ("metric", "mode"),
    [("val_loss", "min"), ("val/NLL", "min"), ("val_err_rate", "min"), ("ppl", "min"),
     ("val_acc", "max"), ("f1_epoch", "max"), ("auroc", "max"), ("answer_acc", "max"),
     ("train/recon_loss_epoch", "min"), ("val_precision", "max")],
)
def test_mode_guessed_from_the_name(metric: str, mode: str) -> None:
    assert guess_mode(metric) == mode


def test_best_choice_waits_for_validation_and_prefers_val_loss() -> None:
    choice = BestChoice(None, None)
    assert choice.settle(["loss"], [], validated=False) is None and choice.metric is None
    line = choice.settle(["loss", "val_acc", "val_loss"], ["val_acc", "val_loss"], validated=True)
    assert choice.metric == "val_loss" and choice.mode == "min" and line
    assert choice.settle(["loss"], ["val_acc"], validated=True) is None  # decided once
    silent = BestChoice(None, None)
    assert silent.settle([], [], validated=True) == (
        "note: the module logs no validation metric; only last.ckpt is saved "
        "(it logs no metric)"
    )
    resumed = BestChoice("val_acc", None)
    assert not resumed.restore("val_loss", "min") and resumed.restore("val_acc", "max")
    assert resumed.mode == "max" and resumed.settled
