"""Fixtures for the trainer tests: no launcher variables leak in; in-process training runs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .helpers import LAUNCH_VARS, OTHER_VARS, TINY_SPIRAL


@pytest.fixture(autouse=True)
def _no_launcher(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith(("SLURM_", "TORCHELASTIC_")) or name in LAUNCH_VARS + OTHER_VARS:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    yield


@pytest.fixture
def train(capsys: pytest.CaptureFixture[str]) -> Any:
    """In-process runs: train(run_dir, *overrides, task=, resume=) -> (stdout, metrics)."""
    from hpctrain.trainconfig.load import load_config
    from hpctrain.trainer.runner import run_training

    def _train(
        run_dir: Path, *overrides: str, task: str = "spiral", resume: str = "auto"
    ) -> tuple[str, dict[str, Any]]:
        config = load_config(
            task=task, overrides=[*TINY_SPIRAL, *overrides] if task == "spiral" else list(overrides)
        )
        summary = run_training(config, run_dir=run_dir, resume=resume)
        return capsys.readouterr().out, summary

    return _train
