"""Run one training: resolve the launch, build task and Trainer, resume, fit, report."""

from __future__ import annotations

import logging
import os
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.fabric.plugins.environments import (
    ClusterEnvironment,
    LightningEnvironment,
    SLURMEnvironment,
    TorchElasticEnvironment,
)
from lightning.pytorch.strategies import DDPStrategy

from hpctrain import __version__, timeline
from hpctrain.errors import ConfigError
from hpctrain.tasks import registry
from hpctrain.tasks.registry import Task
from hpctrain.trainconfig.load import dump_config
from hpctrain.trainconfig.model import TrainConfig
from hpctrain.trainer.callbacks import AtomicCheckpointIO, atomic_write_text
from hpctrain.trainer.cluster import ProcessLayout, detect_topology, resolve_run_dir
from hpctrain.trainer.imports import write_imports
from hpctrain.trainer.loggers import (
    LogStart,
    build_loggers,
    log_settings,
    remember_mlflow_run,
)
from hpctrain.trainer.midepoch import ExactResume
from hpctrain.trainer.recorder.console import Console
from hpctrain.trainer.recorder.lines import done_line
from hpctrain.trainer.recorder.run import RunRecorder
from hpctrain.trainer.recorder.writer import RunIdentity
from hpctrain.trainer.records import Facts, RunHistory
from hpctrain.trainer.restarts import run_history
from hpctrain.trainer.resume import choose_checkpoint, validate_checkpoint
from hpctrain.trainer.signals import StopSignals, clear_stale_markers, segment_start
from hpctrain.trainer.startmarks import MarkedDDPStrategy, StartupMarks
from hpctrain.trainer.startup import Origin
from hpctrain.trainer.stopping import SafeStop, hand_signals_to_hpctrain
from hpctrain.trainer.tracker import start_tracker_run
from hpctrain.values.rundir import RunDir

# When torch, Lightning and the trainer's modules were imported: start-up's largest part.
IMPORTED_AT = time.time()


class CheckedSLURMEnvironment(SLURMEnvironment):
    """Lightning's SLURM environment, trusting the layout hpctrain already checked."""

    def __init__(self, topology: ProcessLayout) -> None:
        self.topology = topology
        # hpctrain's safe stop (stopping.py) replaces Lightning's requeue-from-a-signal-handler.
        super().__init__(auto_requeue=False)

    @staticmethod
    def _validate_srun_variables() -> None:
        # Lightning rejects --ntasks without --ntasks-per-node; detect_topology reads the
        # actual per-node layout instead and rejects only uneven or miscounted layouts.
        return None

    def validate_settings(self, num_devices: int, num_nodes: int) -> None:
        topo = self.topology
        if (num_devices, num_nodes) != (topo.devices_per_node, topo.num_nodes):
            raise ConfigError(
                f"the Trainer has devices={num_devices}, num_nodes={num_nodes}, but SLURM runs "
                f"{topo.devices_per_node} task(s) per node on {topo.num_nodes} node(s)",
                "set trainer.devices and trainer.num_nodes to auto",
            )


class _DropTip(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("💡 Tip")


def _quiet_lightning(task: Task) -> None:
    """Silence Lightning chatter that does not apply to how hpctrain drives it."""
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(_DropTip())
    # Lightning 2.6 on torch >= 2.10 warns about its own use of torch's pytree API.
    warnings.filterwarnings(
        "ignore", message=r".*isinstance\(treespec, LeafSpec\)` is deprecated.*"
    )
    if task.builtin_step:
        # hpctrain's Classifier logs once per epoch, never per step, values it already reduced
        # over all ranks.
        warnings.filterwarnings("ignore", message=r".*smaller than the logging interval.*")
        warnings.filterwarnings(
            "ignore", message=r".*sync_dist=True.*when logging on epoch level.*"
        )
    # ExactResume (midepoch.py) continues a mid-epoch checkpoint with the epoch's own remaining
    # batches, which is what this warning asks for.
    warnings.filterwarnings("ignore", message=r".*checkpoint that ended before the epoch ended.*")
    if "SLURM_JOB_ID" not in os.environ:
        # srun on a login node's PATH says nothing about this (local) run.
        warnings.filterwarnings("ignore", message=r".*`srun` command is available.*")


def _cluster_environment(config: TrainConfig, topo: ProcessLayout) -> ClusterEnvironment:
    if topo.launch == "slurm":
        return CheckedSLURMEnvironment(topo)
    if topo.launch in ("torchrun", "per-node"):  # a per-node launch's workers: torchrun's layout
        return TorchElasticEnvironment()
    # Explicit, so that Lightning does not pick SLURM inside an interactive allocation.
    return LightningEnvironment()


def _accelerator(config: TrainConfig, topo: ProcessLayout) -> str:
    wanted = config.trainer.accelerator
    cuda = torch.cuda.is_available()
    if wanted == "gpu" and not cuda:
        raise ConfigError(
            "trainer.accelerator is gpu, but no CUDA GPU is visible "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')!r})",
            "set trainer.accelerator: auto (CPU fallback) or request GPUs for the job",
        )
    accelerator = "gpu" if wanted == "gpu" or (wanted == "auto" and cuda) else "cpu"
    if accelerator == "gpu" and topo.devices_per_node > torch.cuda.device_count():
        raise ConfigError(
            f"{topo.devices_per_node} processes per node, but each sees only "
            f"{torch.cuda.device_count()} GPU(s); Lightning needs every process to see all the "
            "node's GPUs",
            "request GPUs with --gres=gpu:N (not --gpus-per-task or --gpu-bind), "
            "or set trainer.devices to the visible count",
        )
    return accelerator


def batches_per_call(config: TrainConfig, accelerator: str) -> int:
    """How many batches a built-in task's training_step call runs (trainer.batches_per_call)."""
    wanted = config.trainer.batches_per_call
    if wanted != "auto":
        return wanted
    return registry.get(config.task).auto_batches_per_call(config.trainer.batch_size, accelerator)


def build_task(
    config: TrainConfig, lr: float, accelerator: str = "cpu"
) -> tuple[L.LightningModule, L.LightningDataModule | None]:
    """The LightningModule and LightningDataModule of the configured task."""
    return registry.get(config.task).build(config, lr, batches_per_call(config, accelerator))


def _banner(
    trainer: L.Trainer,
    facts: Facts,
    config: TrainConfig,
    topo: ProcessLayout,
    run_dir: Path,
    resume: str,
) -> str:
    world = trainer.world_size
    accelerator = "gpu" if trainer.strategy.root_device.type == "cuda" else "cpu"
    backend = getattr(trainer.strategy, "process_group_backend", None) or "none"
    params = sum(p.numel() for p in trainer.lightning_module.parameters())
    builtin = registry.get(config.task).builtin_step
    if builtin:
        origin = f"(base {config.optim.lr:g}, scale-lr {config.optim.scale_lr})"
    else:
        origin = f"({facts.optimizers})"
    lines = [
        f"hpctrain {__version__} trainer: task {config.task} ({params:,} parameters), "
        f"run dir {run_dir}",
        f"world_size={world} nodes={trainer.num_nodes} devices_per_node={trainer.num_devices}"
        f" accelerator={accelerator} backend={backend} launch={topo.launch}",
        f"batch_size={facts.batch_size_per_device} per device, "
        f"effective_batch_size={facts.effective_batch_size}"
        f" learning_rate={facts.learning_rate_text} {origin}",
        f"epochs={config.trainer.max_epochs} resume: {resume}",
    ]
    if facts.accumulate_grad_batches != 1 or config.trainer.global_batch:
        lines.insert(3, f"accumulate_grad_batches={facts.accumulate_grad_batches} "
                     f"global_batch={config.trainer.global_batch or 'unset'}")
    if accelerator == "gpu" and facts.cuda_graphs:
        lines.append(f"cuda graphs: {facts.cuda_graphs}")
    if not builtin:
        lines.append(f"samples/s counts {facts.samples_counted_as}")
    return "\n".join(lines)


def _resume_text(checkpoint: Path | None, header: dict[str, Any] | None, config: TrainConfig,
                 topo: ProcessLayout) -> str:
    """Say where training continues."""
    if checkpoint is None or header is None:
        return "fresh start"
    finished = header["epochs_finished"]
    text = f"from {checkpoint}, continuing at epoch {finished + 1}"
    if header["mid_epoch"]:
        text += " (saved mid-epoch: its remaining batches run first)"
    if finished >= config.trainer.max_epochs and topo.is_rank_zero:
        print(
            f"note: {checkpoint} already holds epoch {finished} of "
            f"{config.trainer.max_epochs}; raise --max-epochs to train further",
            flush=True,
        )
    return text


def _recorder(config: TrainConfig, topo: ProcessLayout, path: Path, resume_text: str,
              checkpoint: Path | None, print_lines: bool, history: RunHistory,
              startup: Origin) -> RunRecorder:
    identity = RunIdentity(
        task=config.task,
        run_dir=path,
        launch=topo.launch,
        slurm_job_id=os.environ.get("SLURM_JOB_ID"),
        resumed_from=checkpoint,
        settings=config.model_dump(mode="json"),
    )
    console = Console(lambda t, facts: _banner(t, facts, config, topo, path, resume_text),
                      epoch_lines=print_lines)
    return RunRecorder(identity, config.checkpoint, console, history, startup)


def _strategy(config: TrainConfig, topo: ProcessLayout) -> DDPStrategy | str:
    if topo.world_size == 1:
        return "auto"
    return MarkedDDPStrategy(find_unused_parameters=config.trainer.find_unused_parameters)


def _fit(trainer: L.Trainer, module: L.LightningModule, datamodule: L.LightningDataModule | None,
         checkpoint: Path | None) -> None:
    """trainer.fit, with DDP's unused-parameters error in hpctrain's terms."""
    try:
        trainer.fit(module, datamodule=datamodule,
                    ckpt_path=str(checkpoint) if checkpoint else None)
    except RuntimeError as e:
        if "find_unused_parameters" not in str(e):
            raise
        raise ConfigError(
            "under DDP the module's loss left some parameters unused in a step "
            "(several optimizers, or parts of the model a step skips)",
            "set trainer.find_unused_parameters: true (--set trainer.find_unused_parameters=true)",
        ) from e


def _trainer(config: TrainConfig, topo: ProcessLayout, path: Path, accelerator: str,
             loggers: list[Any], callbacks: list[L.Callback], bar: bool) -> L.Trainer:
    # A user's module is driven by Lightning's sampler, clipping and accumulation; hpctrain's
    # Classifier shards its own data and clips and accumulates itself (manual optimization).
    user_step = not registry.get(config.task).builtin_step
    return L.Trainer(
        accelerator=accelerator,
        devices=topo.devices_per_node,
        num_nodes=topo.num_nodes,
        strategy=_strategy(config, topo),
        plugins=[_cluster_environment(config, topo), AtomicCheckpointIO()],
        precision=config.trainer.precision,
        max_epochs=config.trainer.max_epochs,
        logger=loggers or False,
        callbacks=callbacks,
        enable_progress_bar=bar,
        enable_checkpointing=True,
        # The banner gives the parameter count; Lightning's summary table would land in stdout.
        enable_model_summary=False,
        use_distributed_sampler=user_step,
        default_root_dir=path,
        num_sanity_val_steps=config.trainer.num_sanity_val_steps,
        check_val_every_n_epoch=config.trainer.check_val_every_n_epoch,
        gradient_clip_val=config.trainer.gradient_clip_val if user_step else None,
        accumulate_grad_batches=(config.trainer.accumulate_grad_batches or 1) if user_step else 1,
        log_every_n_steps=config.logging.every_n_steps,
        benchmark=accelerator == "gpu",
    )


def resolve_batch(config: TrainConfig, world: int) -> TrainConfig:
    """trainer.global_batch split for the world size this run got: per-device batch and
    accumulation written into the config (config.yaml in the run directory shows them)."""
    t = config.trainer
    if t.global_batch is None:
        if t.max_device_batch is not None:
            raise ConfigError("trainer.max_device_batch applies only with trainer.global_batch",
                              "set trainer.global_batch (--global-batch N) or drop it")
        return config
    from hpctrain.values.batching import split_batch

    try:
        split = split_batch(t.global_batch, world, t.max_device_batch, t.accumulate_grad_batches)
    except ConfigError as e:
        raise ConfigError(f"trainer.global_batch: {e.what}", e.fix) from None
    batch = {"batch_size": split.per_device, "accumulate_grad_batches": split.accumulation}
    return config.model_copy(update={"trainer": t.model_copy(update=batch)})


def _startup_origin(run_started: float) -> Origin:
    """Where start-up is measured from, and when the imports were done (from process start)."""
    from hpctrain.trainer.startup import PROCESS_START, origin

    start, label = origin(run_started)
    return Origin(start, label, IMPORTED_AT if label == PROCESS_START else None)


def _finish(trainer: L.Trainer, recorder: RunRecorder, path: Path) -> None:
    """Record a complete run on rank 0: metrics.json, the training-complete marker, a line."""
    if not trainer.is_global_zero:
        return
    metrics = recorder.finish(trainer)
    done = f"{metrics.epochs_completed} of {metrics.max_epochs}\n"
    atomic_write_text(RunDir(path).training_complete, done)
    print(done_line(metrics, path), flush=True)


def run_training(
    config: TrainConfig,
    run_dir: str | Path | None = None,
    resume: str = "auto",
    callbacks: Sequence[L.Callback] = (),
) -> dict[str, Any]:
    """Train as configured (plus extra callbacks); returns the metrics.json content on rank 0."""
    # The flag handlers come first, so that a stop asked for while the task loads is kept.
    with StopSignals() as signals:
        return _run(config, run_dir, resume, callbacks, signals)


def _run(
    config: TrainConfig,
    run_dir: str | Path | None,
    resume: str,
    callbacks: Sequence[L.Callback],
    signals: StopSignals,
) -> dict[str, Any]:
    topo = detect_topology(os.environ, config.trainer.devices, config.trainer.num_nodes)
    config = resolve_batch(config, topo.world_size)
    path = resolve_run_dir(run_dir, config.task, topo)
    timeline.attach(path)
    if topo.launch == "local" and topo.world_size > 1:
        # Lightning re-runs this command for the other local processes; they must name the
        # same directory, not one with their own timestamp.
        os.environ["HPCTRAIN_RUN_DIR"] = str(path)
    _quiet_lightning(registry.get(config.task))
    accelerator = _accelerator(config, topo)
    if accelerator == "gpu":
        torch.set_float32_matmul_precision(config.trainer.matmul_precision)

    lr = config.optim.lr * (topo.world_size if config.optim.scale_lr == "linear" else 1)
    L.seed_everything(config.seed, workers=True, verbose=False)
    module, datamodule = build_task(config, lr, accelerator)
    checkpoint = choose_checkpoint(resume, path)
    header = validate_checkpoint(checkpoint, module, config.task) if checkpoint else None
    resume_text = _resume_text(checkpoint, header, config, topo)

    since = segment_start(os.environ, signals.started)
    path.mkdir(parents=True, exist_ok=True)
    if topo.is_rank_zero:
        atomic_write_text(RunDir(path).config, dump_config(config))
        clear_stale_markers(path, since)
    # One tracker run across every start of this run directory (tracker.py); the loggers
    # continue it from the checkpoint's step.
    resumed_at = header["logged_steps"] if header else None
    tracker = start_tracker_run(RunDir(path).tracker_run, topo.is_rank_zero, resumed_at)
    start = LogStart.of(tracker, resumed_at, topo.is_rank_zero)
    loggers = build_loggers(config.logging, path, config.task, start)
    remember_mlflow_run(loggers, RunDir(path).tracker_run, start)
    log_settings(loggers, config.model_dump(mode="json"), start)

    progress = config.logging.progress
    bar = progress == "bar" or (progress == "auto" and sys.stdout.isatty())
    history = run_history(RunDir(path).metrics, resume, checkpoint, header, os.environ)
    recorder = _recorder(config, topo, path, resume_text, checkpoint, not bar, history,
                         _startup_origin(signals.started))
    stop = SafeStop(signals, recorder, config.trainer.stop_check_every_n_steps, since,
                    check_file=topo.local_rank == 0, launch=topo.launch)
    exact = ExactResume(config.seed, mid_epoch=bool(header and header["mid_epoch"]))
    trainer = _trainer(config, topo, path, accelerator, loggers,
                       [exact, recorder, StartupMarks(), *callbacks, stop], bar)
    hand_signals_to_hpctrain(trainer)
    if topo.is_rank_zero:
        # Before fit: the task, its data, Lightning and torch are imported by now, and a run
        # that fails in training still says what it ran with.
        write_imports(path)
    _fit(trainer, module, datamodule, checkpoint)
    _finish(trainer, recorder, path)
    return recorder.summary()
