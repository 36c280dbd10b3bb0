"""`hpctrain train`'s own options, through the real entry point: what each changes in a run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.trainer.helpers import clean_env, epochs_in

SMALL = ("--set", "data.samples=512")


def _train(tmp_path: Path, args: list[str], timeout_s: float = 300) -> str:
    res = subprocess.run(args, env=clean_env({"HPCTRAIN_HOME": str(tmp_path / "home")}),
                         cwd=tmp_path, capture_output=True, text=True, timeout=timeout_s,
                         stdin=subprocess.DEVNULL, check=False)
    assert res.returncode == 0, f"{args}:\n{res.stdout}\n{res.stderr}"
    return res.stdout


def _metrics(run_dir: Path) -> dict[str, Any]:
    return dict(json.loads((run_dir / "metrics.json").read_text()))


def test_batch_size_lr_and_seed(tmp_path: Path) -> None:
    runs = {name: tmp_path / name for name in ("a", "same", "other")}
    for name, seed in (("a", "3"), ("same", "3"), ("other", "4")):
        _train(tmp_path, [sys.executable, "-m", "hpctrain", "train", "--task", "spiral",
                          "--max-epochs", "2", "--batch-size", "32", "--lr", "0.05",
                          "--seed", seed, "--run-dir", str(runs[name]), *SMALL])
    a = _metrics(runs["a"])
    assert a["batch_size_per_device"] == 32 and a["learning_rate"] == 0.05
    config = yaml.safe_load((runs["a"] / "config.yaml").read_text())
    assert config["trainer"]["batch_size"] == 32 and config["optim"]["lr"] == 0.05
    assert config["seed"] == 3
    # A seed fixes the run: the same seed trains to the same losses, another one does not.
    assert _metrics(runs["same"])["final_train_loss"] == a["final_train_loss"]
    assert _metrics(runs["other"])["final_train_loss"] != a["final_train_loss"]


def test_resume_from_a_checkpoint_and_never(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    _train(tmp_path, [sys.executable, "-m", "hpctrain", "train", "--task", "spiral",
                      "--max-epochs", "2", "--run-dir", str(first), *SMALL])
    ckpt = first / "last.ckpt"
    out = _train(tmp_path, [sys.executable, "-m", "hpctrain", "train", "--task", "spiral",
                            "--max-epochs", "3", "--resume", str(ckpt), "--run-dir", str(second),
                            *SMALL])
    assert epochs_in(out) == [3], out
    resumed = _metrics(second)
    assert resumed["resumed_from"] == str(ckpt) and resumed["first_epoch"] == 3
    # `never` ignores the run directory's own last.ckpt, which `auto` would continue from.
    out = _train(tmp_path, [sys.executable, "-m", "hpctrain", "train", "--task", "spiral",
                            "--max-epochs", "3", "--resume", "never", "--run-dir", str(first),
                            *SMALL])
    assert epochs_in(out) == [1, 2, 3], out
    assert _metrics(first)["resumed_from"] is None


def test_scale_lr_linear_multiplies_by_the_world_size(tmp_path: Path) -> None:
    """Two real ranks (torchrun, gloo on the CPU): the base rate times 2."""
    run_dir = tmp_path / "ddp"
    out = _train(tmp_path, [sys.executable, "-m", "torch.distributed.run", "--standalone",
                            "--nproc-per-node", "2", "-m", "hpctrain", "train", "--task",
                            "spiral", "--max-epochs", "1", "--lr", "0.05", "--scale-lr",
                            "linear", "--run-dir", str(run_dir), *SMALL])
    metrics = _metrics(run_dir)
    assert metrics["world_size"] == 2
    assert metrics["learning_rate"] == 0.1, out
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["optim"]["scale_lr"] == "linear" and config["optim"]["lr"] == 0.05
