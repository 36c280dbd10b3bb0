"""Loggers: CSV always (no network), TensorBoard when installed, Comet ML, W&B and MLflow when
installed and configured; every start of a run continues the same tracker run (tracker.py)."""

from __future__ import annotations

import csv
import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

from hpctrain.errors import ConfigError
from hpctrain.trainer.tracker import read_tracker_run, trim_csv, write_tracker_run
from hpctrain.trainsettings.sections import LoggingSection

COMET_KEY_ENV = "COMET_API_KEY"
WANDB_KEY_ENV = "WANDB_API_KEY"
WANDB_MODE_ENV = "WANDB_MODE"
MLFLOW_URI_ENV = "MLFLOW_TRACKING_URI"
# The tracker file's key for MLflow's own run id (MLflow makes its ids; it takes none).
MLFLOW_RUN_KEY = "mlflow_run_id"


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


@dataclass(frozen=True)
class LogStart:
    """Where this start of a run stands for its loggers."""

    run_id: str | None = None  # the tracker run's id (tracker-run.json)
    # The loggers' steps the checkpoint covers: logged again from here (None: a fresh start).
    resumed_at: int | None = None
    rank_zero: bool = True
    mlflow_run_id: str | None = None

    @classmethod
    def of(cls, tracker: Mapping[str, object], resumed_at: int | None,
           rank_zero: bool) -> LogStart:
        """The start a tracker file (tracker.py) and a checkpoint's header describe."""
        run_id, mlflow_id = tracker.get("id"), tracker.get(MLFLOW_RUN_KEY)
        return cls(run_id if isinstance(run_id, str) else None, resumed_at, rank_zero,
                   mlflow_id if isinstance(mlflow_id, str) else None)


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _wanted(setting: bool | str, name: str, missing: str | None, fix: str) -> bool:
    """Whether logger `name` runs: `missing` says what it lacks here (None: nothing)."""
    if setting is True and missing is not None:
        raise ConfigError(f"logging.{name} is true, but {missing}", fix)
    return setting is True or (setting == "auto" and missing is None)


def _csv(run_dir: Path, start: LogStart) -> Logger:
    logger = ResumableCSVLogger(save_dir=run_dir, name="csv", version="",
                                append=start.resumed_at is not None)
    if start.resumed_at is not None and start.rank_zero:
        # Steps past the checkpoint are trained, and logged, again: each step once.
        trim_csv(Path(logger.log_dir) / ExperimentWriter.NAME_METRICS_FILE, start.resumed_at)
    return logger


def _tensorboard(run_dir: Path, start: LogStart) -> Logger:
    # purge_step: TensorBoard hides the earlier starts' events from this step on.
    resumed = {} if start.resumed_at is None else {"purge_step": start.resumed_at}
    # No hp_metric placeholder (-1 at step 0): the settings are logged twice a start (the run's
    # and Lightning's of the module), and each wrote one, a step logged twice.
    return TensorBoardLogger(save_dir=run_dir, name="tensorboard", version="",
                             default_hp_metric=False, **resumed)  # type: ignore[arg-type]


def _comet(cfg: LoggingSection, task: str, start: LogStart) -> Logger:
    from lightning.pytorch.loggers import CometLogger

    # No api_key argument: comet_ml reads it from the environment itself, so the key never
    # passes through hpctrain's config, hyperparameters or files. The tracker run's id is the
    # experiment's key: every start continues the one experiment.
    resume = {"experiment_key": start.run_id, "mode": "get_or_create"} if start.run_id else {}
    return CometLogger(project=cfg.comet_project or f"hpctrain-{task}",
                       **resume)  # type: ignore[arg-type]


def _wandb(cfg: LoggingSection, run_dir: Path, task: str, start: LogStart) -> Logger:
    from lightning.pytorch.loggers import WandbLogger

    # The key, like Comet's, stays in the environment, where wandb reads it.
    return WandbLogger(project=cfg.wandb_project or f"hpctrain-{task}", name=run_dir.name,
                       save_dir=str(run_dir), id=start.run_id, resume="allow")


def _mlflow(cfg: LoggingSection, run_dir: Path, task: str, start: LogStart,
            env: Mapping[str, str]) -> Logger:
    from lightning.pytorch.loggers import MLFlowLogger

    return MLFlowLogger(
        experiment_name=cfg.mlflow_experiment or f"hpctrain-{task}", run_name=run_dir.name,
        tracking_uri=env[MLFLOW_URI_ENV], run_id=start.mlflow_run_id,
        tags={"hpctrain.tracker_run": start.run_id} if start.run_id else None)


def _missing(module: str, *settings: tuple[str, bool]) -> str | None:
    """What a tracker lacks: its package, or the first setting of the environment not made."""
    if not _importable(module):
        return f"{module} is not installed"
    return next((what for what, made in settings if not made), None)


def build_loggers(
    cfg: LoggingSection,
    run_dir: Path,
    task: str,
    start: LogStart | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Logger]:
    """The loggers this config asks for and this environment supports."""
    env = os.environ if env is None else env
    start = LogStart() if start is None else start
    loggers: list[Logger] = [_csv(run_dir, start)] if cfg.csv else []
    tb = None if _importable("tensorboard") or _importable("tensorboardX") else \
        "neither tensorboard nor tensorboardX is installed"
    if _wanted(cfg.tensorboard, "tensorboard", tb,
               "pip install tensorboard, or set logging.tensorboard: auto"):
        loggers.append(_tensorboard(run_dir, start))
    comet = _missing("comet_ml", (f"${COMET_KEY_ENV} is not set", bool(env.get(COMET_KEY_ENV))))
    if _wanted(cfg.comet, "comet", comet,
               f"pip install comet_ml and export {COMET_KEY_ENV}, or set logging.comet: auto"):
        loggers.append(_comet(cfg, task, start))
    wandb_set = bool(env.get(WANDB_KEY_ENV)) or env.get(WANDB_MODE_ENV) == "offline"
    wandb = _missing("wandb", (f"${WANDB_KEY_ENV} is not set (nor {WANDB_MODE_ENV}=offline)",
                               wandb_set))
    if _wanted(cfg.wandb, "wandb", wandb, f"pip install wandb and export {WANDB_KEY_ENV} "
               f"(or {WANDB_MODE_ENV}=offline), or set logging.wandb: auto"):
        loggers.append(_wandb(cfg, run_dir, task, start))
    mlflow = _missing("mlflow", (f"${MLFLOW_URI_ENV} is not set", bool(env.get(MLFLOW_URI_ENV))))
    if _wanted(cfg.mlflow, "mlflow", mlflow, f"pip install mlflow and export {MLFLOW_URI_ENV} "
               "(a server, or sqlite:///<file> for a store of your own), or set logging.mlflow: "
               "auto"):
        loggers.append(_mlflow(cfg, run_dir, task, start, env))
    return loggers


def log_settings(loggers: list[Logger], settings: Mapping[str, object], start: LogStart) -> None:
    """Log the run's settings as each logger's hyperparameters.

    Not again to an MLflow run a start continues: MLflow refuses a changed value of a logged
    parameter (a later start's raised max_epochs), and the first start logged them.
    """
    from lightning.pytorch.loggers import MLFlowLogger

    for logger in loggers:
        if not (isinstance(logger, MLFlowLogger) and start.mlflow_run_id is not None):
            logger.log_hyperparams(dict(settings))


def remember_mlflow_run(loggers: list[Logger], tracker_file: Path, start: LogStart) -> None:
    """Keep the MLflow run id its first start made in the tracker file (rank 0), so that the
    later starts continue that run: MLflow makes its run ids and takes none of ours."""
    if not start.rank_zero or start.mlflow_run_id is not None:
        return
    from lightning.pytorch.loggers import MLFlowLogger

    for logger in loggers:
        if isinstance(logger, MLFlowLogger) and logger.run_id:
            data = read_tracker_run(tracker_file)
            write_tracker_run(tracker_file, {**data, MLFLOW_RUN_KEY: logger.run_id})
