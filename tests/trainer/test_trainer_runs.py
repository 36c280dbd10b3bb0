"""Training runs: spiral accuracy, resume, checkpoints, custom modules, MNIST files, secrets."""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pytest
import torch

from hpctrain.errors import ConfigError
from hpctrain.tasks.parts.datasets.idx import write_idx
from hpctrain.trainer.callbacks import AtomicCheckpointIO
from hpctrain.trainer.entry import main as trainer_main

from .helpers import EPOCH_LINE, ONE_BATCH_PER_CALL, TINY_SPIRAL, epochs_in, run_module

METRICS_KEYS = {
    "wall_time_s",
    "epoch_times_s",
    "samples_per_s",
    "world_size",
    "num_nodes",
    "devices_per_node",
    "final_train_loss",
    "final_val_loss",
    "final_val_acc",
    "epochs_completed",
}


@pytest.mark.slow
def test_spiral_defaults_reach_90_percent_in_20_epochs(tmp_path: Path) -> None:
    # In epochs, not seconds: speed is measured in benchmarks/ (trainer_overhead.py).
    result = run_module(["--task", "spiral", "--run-dir", str(tmp_path / "run")])
    assert result.returncode == 0, result.stderr
    assert "world_size=1 nodes=1 devices_per_node=1 accelerator=cpu" in result.stdout
    lines = list(EPOCH_LINE.finditer(result.stdout))
    assert [int(m.group(1)) for m in lines] == list(range(1, 21))
    assert float(lines[-1].group(5)) >= 0.9
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert set(metrics) >= METRICS_KEYS
    assert metrics["status"] == "completed"
    assert metrics["final_val_acc"] >= 0.9
    assert metrics["epochs_completed"] == 20 and len(metrics["epoch_times_s"]) == 20
    assert metrics["world_size"] == 1 and metrics["samples_per_s"] > 0


def test_resume_continues_at_the_next_epoch(train: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    out, first = train(run, "trainer.max_epochs=2")
    assert epochs_in(out) == [1, 2]
    assert (run / "last.ckpt").is_file() and (run / "best.ckpt").is_file()
    assert first["epochs_completed"] == 2 and first["first_epoch"] == 1

    out, second = train(run, "trainer.max_epochs=4")
    assert "continuing at epoch 3" in out
    assert epochs_in(out) == [3, 4]
    assert second["first_epoch"] == 3 and second["epochs_completed"] == 4
    assert second["resumed_from"] == str(run / "last.ckpt")
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["epochs_completed"] == 4
    csv_epochs = {
        int(line.split(",")[0])
        for line in (run / "csv" / "metrics.csv").read_text().splitlines()[1:]
    }
    assert csv_epochs == {0, 1, 2, 3}

    out, _ = train(run, "trainer.max_epochs=4")
    assert "already holds epoch 4 of 4" in out and epochs_in(out) == []

    out, fresh = train(run, "trainer.max_epochs=1", resume="never")
    assert epochs_in(out) == [1] and fresh["resumed_from"] is None


def test_resume_from_an_explicit_checkpoint(train: Any, tmp_path: Path) -> None:
    train(tmp_path / "a", "trainer.max_epochs=1")
    out, summary = train(
        tmp_path / "b", "trainer.max_epochs=2", resume=str(tmp_path / "a" / "last.ckpt")
    )
    assert epochs_in(out) == [2]
    with pytest.raises(ConfigError, match="no such checkpoint file"):
        train(tmp_path / "c", resume=str(tmp_path / "missing.ckpt"))


def test_corrupt_checkpoint_is_an_error_not_a_restart(
    train: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    train(run, "trainer.max_epochs=1")
    (run / "last.ckpt").write_bytes(b"\x00 not a checkpoint")
    with pytest.raises(ConfigError) as e:
        train(run, "trainer.max_epochs=3")
    assert "cannot be used" in str(e.value) and "corrupt" in str(e.value)
    # The module entry point turns it into one "Error:" line and exit status 1.
    code = trainer_main(
        ["--task", "spiral", "--run-dir", str(run), *[f"--set={o}" for o in TINY_SPIRAL]]
    )
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("Error: checkpoint ") and "Traceback" not in err


def test_checkpoint_of_another_model_is_an_error(train: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    train(run, "trainer.max_epochs=1")
    with pytest.raises(ConfigError, match="does not match this model"):
        train(run, "trainer.max_epochs=2", "model.hidden=[8]")


def test_checkpoint_writes_are_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    io = AtomicCheckpointIO()
    target = tmp_path / "last.ckpt"
    io.save_checkpoint({"epoch": 1}, target)
    assert torch.load(target, weights_only=True) == {"epoch": 1}

    def torn_save(obj: Any, f: Any) -> None:
        f.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", torn_save)
    with pytest.raises(OSError, match="disk full"):
        io.save_checkpoint({"epoch": 2}, target)
    monkeypatch.undo()
    assert torch.load(target, weights_only=True) == {"epoch": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]


def test_secret_key_never_reaches_the_run_dir(
    train: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "comet-SECRET-5f0e1d2c3b4a"
    monkeypatch.setenv("COMET_API_KEY", secret)
    run = tmp_path / "run"
    _, summary = train(run, "trainer.max_epochs=1")
    files = [p for p in run.rglob("*") if p.is_file()]
    assert {"metrics.json", "config.yaml", "last.ckpt", "metrics.csv"} <= {p.name for p in files}
    for path in files:
        assert secret.encode() not in path.read_bytes(), path
    assert secret not in json.dumps(summary)


def test_custom_module_and_datamodule_train(
    train: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    out, summary = train(
        tmp_path / "run",
        "custom.module=custom_pkg.blobs:BlobClassifier",
        "custom.module_kwargs={width: 8}",
        "custom.datamodule=custom_pkg.blobs:BlobData",
        "trainer.max_epochs=3",
        "trainer.batch_size=32",
        "optim.lr=0.2",
        task="custom",
    )
    assert epochs_in(out) == [1, 2, 3]
    assert summary["final_val_acc"] >= 0.9
    hparams = (tmp_path / "run" / "csv" / "hparams.yaml").read_text()
    assert "width: 8" in hparams
    # What the run imported, with the versions it ran with: the trainer's own stack, not the
    # whole environment (no test runner, no linter).
    imported = json.loads((tmp_path / "run" / "imports.json").read_text())["packages"]
    assert imported["torch"] == metadata.version("torch")
    assert {"lightning", "numpy", "pyyaml"} <= set(imported)
    assert not {"ruff", "mypy", "import-linter"} & set(imported)


@pytest.mark.parametrize(
    ("module", "message"),
    [
        ("custom_pkg.nothere:X", "cannot import module 'custom_pkg.nothere'"),
        ("custom_pkg.blobs:Missing", "has no attribute 'Missing'"),
        ("custom_pkg.blobs:BlobData", "is not a subclass of lightning.pytorch"),
    ],
)
def test_wrong_class_paths_are_clear_errors(
    train: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, message: str
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    with pytest.raises(ConfigError, match=message) as e:
        train(
            tmp_path / "run",
            f"custom.module={module}",
            "custom.datamodule=custom_pkg.blobs:BlobData",
            task="custom",
        )
    assert str(e.value).startswith("custom.module: ")


def test_wrong_custom_kwargs(train: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    with pytest.raises(ConfigError, match="BlobClassifier does not accept") as e:
        train(
            tmp_path / "run",
            "custom.module=custom_pkg.blobs:BlobClassifier",
            "custom.module_kwargs={depth: 3}",
            "custom.datamodule=custom_pkg.blobs:BlobData",
            task="custom",
        )
    assert "it takes: lr, width" in str(e.value)


def test_mnist_cnn_trains_on_generated_idx_files(train: Any, tmp_path: Path) -> None:
    data = tmp_path / "mnist"
    data.mkdir()
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 256), ("t10k", 64)):
        write_idx(
            data / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28), np.uint8)
        )
        write_idx(data / f"{prefix}-labels-idx1-ubyte", rng.integers(0, 10, n, np.uint8))
    out, summary = train(
        tmp_path / "run",
        f"data.dir={data}",
        "data.num_workers=1",
        "trainer.max_epochs=1",
        "trainer.batch_size=64",
        task="mnist",
    )
    assert epochs_in(out) == [1]
    assert summary["epochs"][0]["samples"] == 256
    assert summary["final_val_acc"] is not None and summary["final_train_loss"] > 0


def test_mnist_without_data_says_how_to_fetch(train: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        train(tmp_path / "run", f"data.dir={tmp_path / 'none'}", task="mnist")
    assert f"hpctrain data fetch mnist --to {tmp_path / 'none'}" in str(e.value)


def test_auto_resume_picks_the_newest_checkpoint(tmp_path: Path) -> None:
    from hpctrain.trainer.resume import choose_checkpoint

    assert choose_checkpoint("auto", tmp_path) is None
    (tmp_path / "last.ckpt").write_bytes(b"x")
    hpc = tmp_path / "hpc_ckpt_2.ckpt"
    hpc.write_bytes(b"x")
    os.utime(tmp_path / "last.ckpt", (1_000_000, 1_000_000))
    # Lightning's requeue handler wrote hpc_ckpt_2 after the last epoch ended.
    assert choose_checkpoint("auto", tmp_path) == hpc
    with pytest.raises(ConfigError, match="hpc_ckpt_2.ckpt"):
        choose_checkpoint("never", tmp_path)


def test_slurm_layout_disagreeing_with_pinned_devices(
    train: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in {
        "SLURM_JOB_ID": "9",
        "SLURM_NTASKS": "4",
        "SLURM_NTASKS_PER_NODE": "4",
        "SLURM_NNODES": "1",
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": "0",
    }.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError) as e:
        train(tmp_path / "run", "trainer.devices=2")
    assert "trainer.devices=2" in str(e.value) and "4 process(es) per node" in str(e.value)
    assert not (tmp_path / "run").exists()


class _Preempt(L.Callback):
    """Saves a requeue checkpoint in the middle of epoch 2, then dies like a preempted job."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any, i: int
    ) -> None:
        if trainer.current_epoch == 1 and i == 5:
            trainer.save_checkpoint(self.run_dir / "hpc_ckpt_1.ckpt")
            raise _Preempted


class _Preempted(Exception):
    pass


def test_requeue_checkpoint_saved_mid_epoch_resumes_in_that_epoch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hpctrain.trainconfig.load import load_config
    from hpctrain.trainer.runner import run_training

    run = tmp_path / "run"
    config = load_config(overrides=[*TINY_SPIRAL, ONE_BATCH_PER_CALL, "trainer.max_epochs=3"])
    with pytest.raises(_Preempted):
        run_training(config, run, callbacks=[_Preempt(run)])
    assert epochs_in(capsys.readouterr().out) == [1]
    summary = run_training(config, run)
    out = capsys.readouterr().out
    assert "hpc_ckpt_1.ckpt, continuing at epoch 2 (saved mid-epoch" in out
    assert epochs_in(out) == [2, 3]
    # Issue 11: the interrupted epoch continues with its own remaining 7 of 13 batches (the
    # last one short), and metrics.json keeps every epoch once, the split one counted whole.
    assert [e["samples"] for e in summary["epochs"]] == [3277, 3277, 3277]
    assert summary["first_epoch"] == 2
