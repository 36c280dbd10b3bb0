"""A setting made in a --config file and the same flag give the same run: the trainer's
metrics.json records identical `settings` (the job side reads these settings from the same
model: tests/unit/test_trainer_options.py shows the rendered jobs are identical too)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpctrain.trainer import entry

from .helpers import TINY_SPIRAL

pytestmark = pytest.mark.slow

# Each setting the job side reads: as a file writes it, and as flags give it.
SETTINGS = {
    "global_batch": ("trainer: {global_batch: 512}\n", ["--global-batch", "512"]),
    "max_device_batch": ("trainer: {global_batch: 512, max_device_batch: 128}\n",
                         ["--global-batch", "512", "--max-device-batch", "128"]),
    "cuda_graphs": ("trainer: {cuda_graphs: false}\n", ["--set", "trainer.cuda_graphs=false"]),
}
COMMON = ["--task", "spiral", "--max-epochs", "1", "--resume", "never",
          *(arg for item in TINY_SPIRAL for arg in ("--set", item))]


def _settings(run_dir: Path, args: list[str]) -> dict[str, object]:
    assert entry.main([*COMMON, *args, "--run-dir", str(run_dir)]) == 0
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["status"] == "completed"
    settings: dict[str, object] = metrics["settings"]
    return settings


@pytest.mark.parametrize("name", list(SETTINGS))
def test_a_file_and_the_same_flag_record_the_same_settings(tmp_path: Path, name: str) -> None:
    text, flags = SETTINGS[name]
    (tmp_path / "my.yaml").write_text(text)
    from_file = _settings(tmp_path / "file", ["--config", str(tmp_path / "my.yaml")])
    from_flag = _settings(tmp_path / "flag", flags)
    assert from_file == from_flag
    trainer = from_file["trainer"]
    assert isinstance(trainer, dict)
    if name != "cuda_graphs":
        # The global batch was split for this run's one process: all of it on the device, or
        # at most 128 per step with the rest accumulated.
        assert trainer["global_batch"] == 512
        cap = trainer["max_device_batch"]
        assert (trainer["batch_size"], trainer["accumulate_grad_batches"]) == (
            (512, 1) if cap is None else (128, 4))
    else:
        assert trainer["cuda_graphs"] is False
