"""Loggers: CSV always (no network), TensorBoard when installed, Comet ML when a key is set."""

from __future__ import annotations

import csv
import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path

from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

from hpctrain.errors import ConfigError
from hpctrain.trainsettings.sections import LoggingSection

COMET_KEY_ENV = "COMET_API_KEY"


class _AppendingWriter(ExperimentWriter):
    """Lightning's CSV writer, continuing an existing metrics.csv instead of deleting it."""

    def _check_log_dir_exists(self) -> None:
        if os.path.isfile(self.metrics_file_path):
            with open(self.metrics_file_path, newline="") as f:
                self.metrics_keys = sorted(next(csv.reader(f), []))


class ResumableCSVLogger(CSVLogger):
    """A CSVLogger whose metrics.csv survives a resumed (requeued) run."""

    def __init__(self, *args: object, append: bool = False, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._append = append

    @property
    def experiment(self) -> ExperimentWriter:
        experiment = self._experiment
        if experiment is None:
            os.makedirs(self.root_dir, exist_ok=True)
            writer = _AppendingWriter if self._append else ExperimentWriter
            experiment = self._experiment = writer(log_dir=self.log_dir)
        assert isinstance(experiment, ExperimentWriter)
        return experiment


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def build_loggers(
    cfg: LoggingSection,
    run_dir: Path,
    task: str,
    resuming: bool = False,
    env: Mapping[str, str] | None = None,
) -> list[Logger]:
    """The loggers this config asks for and this environment supports."""
    env = os.environ if env is None else env
    loggers: list[Logger] = []
    if cfg.csv:
        loggers.append(
            ResumableCSVLogger(save_dir=run_dir, name="csv", version="", append=resuming)
        )

    has_tb = _importable("tensorboard") or _importable("tensorboardX")
    if cfg.tensorboard is True and not has_tb:
        raise ConfigError(
            "logging.tensorboard is true, but neither tensorboard nor tensorboardX is installed",
            "pip install tensorboard, or set logging.tensorboard: auto",
        )
    if cfg.tensorboard is True or (cfg.tensorboard == "auto" and has_tb):
        loggers.append(TensorBoardLogger(save_dir=run_dir, name="tensorboard", version=""))

    has_key = bool(env.get(COMET_KEY_ENV))
    has_comet = _importable("comet_ml")
    if cfg.comet is True and not (has_key and has_comet):
        missing = "comet_ml is not installed" if not has_comet else f"${COMET_KEY_ENV} is not set"
        raise ConfigError(
            f"logging.comet is true, but {missing}",
            f"pip install comet_ml and export {COMET_KEY_ENV}, or set logging.comet: auto",
        )
    if cfg.comet is True or (cfg.comet == "auto" and has_key and has_comet):
        from lightning.pytorch.loggers import CometLogger

        # No api_key argument: comet_ml reads it from the environment itself, so the key never
        # passes through hpctrain's config, hyperparameters or files.
        loggers.append(CometLogger(project=cfg.comet_project or f"hpctrain-{task}"))
    return loggers
