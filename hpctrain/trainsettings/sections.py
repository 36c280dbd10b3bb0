"""The trainer's settings as pydantic models: one section per concern, every field validated.

`TrainSettings` holds every field; `trainconfig/model.py: TrainConfig` adds the checks against
the task registry. Loaded by `trainconfig/load.py`; read by the trainer and, before a job
queues, by the job side.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hpctrain.trainsettings import ScaleLr

PositiveInt = Annotated[int, Field(gt=0)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DataConfig(_Section):
    """Where the data comes from: generated (spiral, synthcifar) or read (mnist, fashionmnist)."""

    dir: str | None = Field(
        default=None, description="IDX files; default $HPCTRAIN_DATA_DIR/<task>, else ./data/<task>"
    )
    num_workers: int = Field(
        default=2, ge=0, description="DataLoader workers per process (file tasks)"
    )
    on_device: bool | Literal["auto"] = Field(
        default="auto",
        description="file tasks: hold the images on the training device (uint8, normalized per "
        "batch) instead of a DataLoader; auto: when they fit in half its free memory",
    )
    samples: int = Field(
        default=200000, ge=8, description="spiral, synthcifar: samples in total (train + val)"
    )
    val_fraction: float = Field(
        default=0.2, gt=0, lt=1, description="spiral, synthcifar: share held out"
    )
    noise: float = Field(
        default=0.02, ge=0,
        description="spiral, synthcifar: Gaussian noise added to each point or pixel",
    )
    turns: float = Field(default=1.5, gt=0, description="spiral: turns of each arm")


class ModelConfig(_Section):
    """The spiral MLP's hidden layers (the CNNs are fixed, as in the tutorials)."""

    hidden: list[PositiveInt] = Field(default_factory=lambda: [64, 32, 16], min_length=1)


class OptimConfig(_Section):
    """Optimizer of the built-in models; custom modules configure their own."""

    name: Literal["adam", "adamw", "sgd"] = "adam"
    lr: float = Field(default=0.01, gt=0)
    weight_decay: float = Field(default=0.0, ge=0)
    momentum: float = Field(default=0.9, ge=0, description="sgd only")
    scale_lr: ScaleLr = Field(
        default="none", description="linear: lr x world size (the linear scaling rule)"
    )


class TrainerSection(_Section):
    """Lightning Trainer settings; devices/num_nodes come from SLURM when launched by srun."""

    max_epochs: PositiveInt = 20
    batch_size: PositiveInt = Field(default=256, description="per device (process)")
    global_batch: PositiveInt | None = Field(
        default=None,
        description="samples per optimizer step over all devices: sets the per-device batch "
        "(batch_size is then ignored) and the accumulation it needs, whatever the topology",
    )
    max_device_batch: PositiveInt | None = Field(
        default=None, description="with global_batch: at most this many samples per device"
    )
    accumulate_grad_batches: PositiveInt | None = Field(
        default=None,
        description="batches per optimizer step (gradient accumulation); unset: 1, or what "
        "global_batch needs under max_device_batch",
    )
    accelerator: Literal["auto", "cpu", "gpu"] = "auto"
    devices: Literal["auto"] | PositiveInt = "auto"
    num_nodes: Literal["auto"] | PositiveInt = "auto"
    precision: Literal["32-true", "16-mixed", "bf16-mixed"] = "32-true"
    matmul_precision: Literal["highest", "high", "medium"] = "high"
    gradient_clip_val: float | None = Field(default=None, gt=0)
    check_val_every_n_epoch: PositiveInt = 1
    find_unused_parameters: bool = Field(
        default=False,
        description="DDP: let a step's loss leave parameters unused (several optimizers, GANs); "
        "costs an extra pass over the graph per step",
    )
    num_sanity_val_steps: int = Field(default=0, ge=0)
    stop_check_every_n_steps: PositiveInt = Field(
        default=10,
        description="how often all ranks agree whether a stop was asked for (also at epoch "
        "ends), in training_step calls (a built-in task's call runs batches_per_call batches)",
    )
    batches_per_call: Literal["auto"] | PositiveInt = Field(
        default="auto",
        description="built-in tasks with data on the device: batches (optimizer steps) per "
        "Lightning training_step call; auto: 64 for the spiral MLP on a GPU, 32768 samples' worth "
        "on a CPU, 2048 for the CNNs on a GPU, at most 64 (1 for the CNNs on a CPU); custom "
        "tasks: 1",
    )
    cuda_graphs: Literal["auto"] | bool = Field(
        default="auto",
        description="built-in tasks: replay each optimizer step as one CUDA graph (one launch "
        "instead of one per kernel); auto: where it applies (one GPU, 32-true, no clipping or "
        "accumulation), true: stop with the reason where it does not",
    )
    slurm_auto_requeue: bool = Field(
        default=True,
        description="unused: hpctrain's safe stop always replaces Lightning's requeue handler; "
        "kept so that older configs still load",
    )


class CheckpointSection(_Section):
    """last.ckpt every epoch and best.ckpt by a metric the module logs, both written atomically."""

    enabled: bool = True
    monitor: str | None = Field(
        default=None,
        description="a metric the module logs; null: val_loss, else its first validation metric",
    )
    mode: Literal["max", "min"] | None = Field(
        default=None, description="null: min for losses and errors (by the name), else max"
    )
    every_n_epochs: PositiveInt = 1


class LoggingSection(_Section):
    """Loggers and console output."""

    csv: bool = True
    tensorboard: bool | Literal["auto"] = "auto"
    comet: bool | Literal["auto"] = "auto"
    comet_project: str | None = None
    wandb: bool | Literal["auto"] = Field(
        default="auto", description="auto: when wandb is installed and WANDB_API_KEY is set "
        "or WANDB_MODE=offline"
    )
    wandb_project: str | None = None
    mlflow: bool | Literal["auto"] = Field(
        default="auto", description="auto: when mlflow is installed and MLFLOW_TRACKING_URI is set"
    )
    mlflow_experiment: str | None = None
    progress: Literal["auto", "bar", "lines"] = Field(
        default="auto", description="auto: progress bar on a terminal, per-epoch lines otherwise"
    )
    every_n_steps: PositiveInt = 50


class CustomSection(_Section):
    """task: custom - a LightningModule, optionally a LightningDataModule, as 'pkg.mod:Class'."""

    module: str | None = None
    module_kwargs: dict[str, Any] = Field(default_factory=dict)
    datamodule: str | None = None
    datamodule_kwargs: dict[str, Any] = Field(default_factory=dict)


class TrainSettings(_Section):
    """Every field of a trainer configuration, each checked on its own (task: any name)."""

    task: str
    seed: int = 42
    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    trainer: TrainerSection = Field(default_factory=TrainerSection)
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)
    logging: LoggingSection = Field(default_factory=LoggingSection)
    custom: CustomSection = Field(default_factory=CustomSection)
