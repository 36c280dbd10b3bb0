"""Issue 17 on a GPU: the optimizer step replayed as a CUDA graph trains the model the eager step
trains, resumes from either kind of checkpoint, and says where it cannot apply.

These run only where CUDA is visible (the `device` machine); CI has no GPU and skips them. The
CPU side of the option (refusals, what metrics.json says) is tested in tests/trainer.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from hpctrain.errors import ConfigError
from hpctrain.tasks.parts.datasets.idx import write_idx
from hpctrain.trainconfig.load import load_config
from hpctrain.trainer.runner import run_training

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

# 3277 training samples of 256: 12 full batches and a short one per epoch, so both the graph and
# the eager step run every epoch.
SPIRAL = ["data.samples=4096", "trainer.batch_size=256", "optim.lr=0.01",
          "trainer.accelerator=gpu", "logging.progress=lines"]


def _run(run_dir: Path, *overrides: str, task: str = "spiral", resume: str = "never") -> Any:
    base = SPIRAL if task == "spiral" else ["trainer.accelerator=gpu", "logging.progress=lines"]
    return run_training(load_config(task=task, overrides=[*base, *overrides]), run_dir=run_dir,
                        resume=resume)


def _metrics(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.mark.parametrize(("optim", "rel"), [("sgd", 1e-5), ("adam", 1e-2)])
def test_graphed_steps_train_the_model_the_eager_steps_train(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], optim: str, rel: float
) -> None:
    # SGD's step is the same kernels either way; Adam's graphed step counts on the device, where
    # its bias correction is float32 rather than the CPU's double: close, not bit-equal.
    common = ["trainer.max_epochs=3", f"optim.name={optim}"]
    graphed = _run(tmp_path / "graphed", *common, "trainer.cuda_graphs=true")
    out = capsys.readouterr().out
    eager = _run(tmp_path / "eager", *common, "trainer.cuda_graphs=false")
    assert "cuda graphs: on" in out
    assert graphed["cuda_graphs"] == "on"
    assert eager["cuda_graphs"] == "off: trainer.cuda_graphs=false"
    for a, b in zip(graphed["epochs"], eager["epochs"], strict=True):
        assert a["samples"] == b["samples"] == 3277
        for name in ("train_loss", "val_loss"):
            assert a["metrics"][name] == pytest.approx(b["metrics"][name], rel=rel)
    ckpt = torch.load(tmp_path / "graphed" / "last.ckpt", weights_only=False)
    assert ckpt["global_step"] == 3 * 13


@pytest.mark.parametrize(("first", "then"), [("true", "false"), ("false", "true")])
def test_a_run_resumes_across_graphed_and_eager_steps(tmp_path: Path, first: str,
                                                      then: str) -> None:
    straight = _run(tmp_path / "straight", "trainer.max_epochs=4", "trainer.cuda_graphs=false")
    run = tmp_path / "split"
    _run(run, "trainer.max_epochs=2", f"trainer.cuda_graphs={first}")
    # An eager checkpoint holds Adam's step counters on the CPU; a graphed one on the device.
    resumed = _run(run, "trainer.max_epochs=4", f"trainer.cuda_graphs={then}", resume="auto")
    assert resumed["first_epoch"] == 3 and resumed["cuda_graphs"] == ("on" if then == "true"
                                                                      else "off: "
                                                                      "trainer.cuda_graphs=false")
    assert resumed["final_val_loss"] == pytest.approx(straight["final_val_loss"], rel=1e-2)
    ckpt = torch.load(run / "last.ckpt", weights_only=False)
    assert ckpt["global_step"] == 4 * 13
    # Adam's counters carried on across the switch (a reset one would restart its warm-up).
    steps = {float(s["step"]) for s in ckpt["optimizer_states"][0]["state"].values()}
    assert steps == {4 * 13}


def test_the_cnn_with_dropout_runs_graphed_from_device_resident_data(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    data = tmp_path / "mnist"
    data.mkdir()
    for prefix, n in (("train", 700), ("t10k", 100)):
        labels = rng.integers(0, 10, n, np.uint8)
        # A learnable image: its label's row is bright.
        images = rng.integers(0, 60, (n, 28, 28), np.uint8)
        images[np.arange(n), labels * 2 + 4, :] = 255
        write_idx(data / f"{prefix}-images-idx3-ubyte", images)
        write_idx(data / f"{prefix}-labels-idx1-ubyte", labels)
    summary = _run(tmp_path / "run", f"data.dir={data}", "trainer.batch_size=64",
                   "trainer.max_epochs=3", task="mnist")
    assert summary["cuda_graphs"] == "on" and summary["data_on_device"] is True
    assert summary["final_val_acc"] > 0.9


@pytest.mark.parametrize(
    ("override", "why"),
    [("trainer.gradient_clip_val=1.0", "gradient clipping"),
     ("trainer.precision=bf16-mixed", "precision bf16-mixed (32-true only)"),
     ("trainer.accumulate_grad_batches=2", "gradient accumulation")],
)
def test_where_graphs_do_not_apply_auto_says_why_and_true_stops(
    tmp_path: Path, override: str, why: str
) -> None:
    summary = _run(tmp_path / "auto", "trainer.max_epochs=1", override)
    assert summary["cuda_graphs"] == f"off: {why}"
    with pytest.raises(ConfigError, match=re.escape(f"cannot use them: {why}")):
        _run(tmp_path / "true", "trainer.max_epochs=1", override, "trainer.cuda_graphs=true")
