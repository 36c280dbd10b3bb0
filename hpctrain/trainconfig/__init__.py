"""The trainer's configuration: pydantic models, shipped defaults per task, command-line overrides.

Shared by the trainer (inside a job) and the job side (which checks a --config before it
queues), so it lives beside both rather than inside the trainer.

A run's config is built in layers, later ones winning:

1. the shipped default of the task (``hpctrain/trainconfig/defaults/<task>.yaml``),
2. the user's YAML file (``--config FILE``), which only needs the fields it changes,
3. ``--set KEY=VALUE`` overrides, in order, and the shortcut flags (``--max-epochs``,
   ``--batch-size``, ``--lr``, ``--seed``, ``--scale-lr``), which are sugar for ``--set``.

KEY is the dotted path of any field (``trainer.max_epochs``, ``model.hidden``,
``custom.module_kwargs.width``); VALUE is parsed as YAML (``5``, ``0.01``, ``[128, 64]``,
``null``, ``true``). The task is picked by ``--task``, else the file's ``task:``, else spiral.
This module imports neither torch nor Lightning.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hpctrain import yamlfile
from hpctrain.errors import ConfigError

Task = Literal["spiral", "mnist", "fashionmnist", "custom"]
TASKS: tuple[str, ...] = ("spiral", "mnist", "fashionmnist", "custom")
FILE_TASKS: tuple[str, ...] = ("mnist", "fashionmnist")

_CLASS_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
_KEY = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")

PositiveInt = Annotated[int, Field(gt=0)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DataConfig(_Section):
    """Where the data comes from; spiral fields apply to spiral, the rest to mnist/fashionmnist."""

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
    samples: int = Field(default=200000, ge=8, description="spiral: points in total (train + val)")
    val_fraction: float = Field(default=0.2, gt=0, lt=1, description="spiral: share held out")
    noise: float = Field(
        default=0.02, ge=0, description="spiral: Gaussian noise added to each point"
    )
    turns: float = Field(default=1.5, gt=0, description="spiral: turns of each arm")


class ModelConfig(_Section):
    """The spiral MLP's hidden layers (the CNN is fixed, as in the tutorials)."""

    hidden: list[PositiveInt] = Field(default_factory=lambda: [64, 32, 16], min_length=1)


class OptimConfig(_Section):
    """Optimizer of the built-in models; custom modules configure their own."""

    name: Literal["adam", "adamw", "sgd"] = "adam"
    lr: float = Field(default=0.01, gt=0)
    weight_decay: float = Field(default=0.0, ge=0)
    momentum: float = Field(default=0.9, ge=0, description="sgd only")
    scale_lr: Literal["none", "linear"] = Field(
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
        "Lightning training_step call; auto: 64 for the spiral MLP on a GPU, 8192 samples' worth "
        "on a CPU, 2048 for the CNN on a GPU, at most 64 (1 for the CNN on a CPU); custom "
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


class TrainConfig(_Section):
    """A complete, validated trainer configuration."""

    task: Task = "spiral"
    seed: int = 42
    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    trainer: TrainerSection = Field(default_factory=TrainerSection)
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)
    logging: LoggingSection = Field(default_factory=LoggingSection)
    custom: CustomSection = Field(default_factory=CustomSection)

    @model_validator(mode="after")
    def _batches_per_call(self) -> TrainConfig:
        if self.task == "custom" and self.trainer.batches_per_call not in ("auto", 1):
            raise ValueError(
                "trainer.batches_per_call applies to the built-in tasks only (a custom module's "
                "training_step takes one batch); leave it auto"
            )
        if self.task == "custom" and self.trainer.cuda_graphs is True:
            raise ValueError(
                "trainer.cuda_graphs applies to the built-in tasks only (a custom module's step "
                "is its own); leave it auto"
            )
        return self

    @model_validator(mode="after")
    def _custom_classes(self) -> TrainConfig:
        if self.task != "custom":
            return self
        if self.custom.module is None:
            raise ValueError("custom.module is required for task custom")
        for field in ("module", "datamodule"):
            value = getattr(self.custom, field)
            # Without a data module, the module's own *_dataloader methods serve the data.
            if value is not None and not _CLASS_PATH.match(value):
                raise ValueError(
                    f"custom.{field} {value!r} is not of the form 'package.module:ClassName'"
                )
        return self


def shipped_config_path(task: str) -> Path:
    """The packaged default config file of a task."""
    return Path(str(resources.files("hpctrain.trainconfig") / "defaults" / f"{task}.yaml"))


def _read_yaml(path: Path, label: str) -> dict[str, Any]:
    try:
        data = yamlfile.load(yamlfile.read_text(path))
    except yamlfile.YamlInputError as e:
        if e.what == "does not exist":
            raise ConfigError(f"config file {label} does not exist", "check the path") from None
        raise ConfigError(f"config file {label} {e.what}", e.fix) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e)
        raise ConfigError(f"{label}: invalid YAML{where}: {problem}", "fix the YAML syntax") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{label}: the top level must be a mapping of fields, not {type(data).__name__}",
            "write it as 'key: value' lines, e.g. 'task: spiral'",
        )
    return data


def parse_override(item: str) -> tuple[str, Any]:
    """Split 'a.b=value' into the dotted key and the YAML-parsed value."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not _KEY.match(key):
        raise ConfigError(
            f"override {item!r} is not KEY=VALUE with a dotted KEY",
            "e.g. --set trainer.max_epochs=5 or --set model.hidden=[128,64]",
        )
    try:
        value = yamlfile.load(raw) if raw.strip() else None
    except yamlfile.YamlInputError as e:
        raise ConfigError(f"override {key}: the value {e.what}", e.fix) from None
    except yaml.YAMLError as e:
        raise ConfigError(f"override {item!r}: the value is not valid YAML") from e
    return key, value


def _merge(
    base: dict[str, Any],
    layer: dict[str, Any],
    label: str,
    origins: dict[tuple[str, ...], str],
    prefix: tuple[str, ...] = (),
) -> None:
    for key, value in layer.items():
        path = (*prefix, str(key))
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value, label, origins, path)
        else:
            base[key] = value
            origins[path] = label


def _set_dotted(
    data: dict[str, Any], key: str, value: Any, origins: dict[tuple[str, ...], str]
) -> None:
    parts = key.split(".")
    node = data
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            where = ".".join(parts[: i + 1])
            raise ConfigError(
                f"--set {key}: {where} is a value, not a section", "check the key's spelling"
            )
        node = child
    node[parts[-1]] = value
    origins[tuple(parts)] = "--set"


def _origin(loc: tuple[str, ...], origins: dict[tuple[str, ...], str], default: str) -> str:
    for n in range(len(loc), 0, -1):
        if loc[:n] in origins:
            return origins[loc[:n]]
    # An unknown section: whoever set a value inside it.
    inside = [label for path, label in origins.items() if path[: len(loc)] == loc]
    return inside[-1] if inside else default


def _format_errors(
    error: ValidationError, origins: dict[tuple[str, ...], str], default: str
) -> list[str]:
    lines = []
    for item in error.errors():
        loc = tuple(str(p) for p in item["loc"])
        where = ".".join(loc) or "(top level)"
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            message = "unknown field"
        elif item["type"] not in ("missing",) and loc:
            message += f" (got {item.get('input')!r})"
        lines.append(f"{_origin(loc, origins, default)}: {where}: {message}")
    return lines


def choose_task(file_data: dict[str, Any], task: str | None, label: str) -> str:
    """The task of this run: --task, else the file's task:, else spiral."""
    file_task = file_data.get("task")
    if task is not None and file_task is not None and task != file_task:
        raise ConfigError(
            f"--task {task} conflicts with 'task: {file_task}' in {label}",
            "drop --task or change the file",
        )
    chosen = task or file_task or "spiral"
    if chosen not in TASKS:
        raise ConfigError(
            f"{label if file_task and not task else '--task'}: unknown task {chosen!r}",
            f"use one of {', '.join(TASKS)}",
        )
    return str(chosen)


def load_config(
    config_file: str | Path | None = None,
    task: str | None = None,
    overrides: list[str] | tuple[str, ...] = (),
) -> TrainConfig:
    """Build the validated config from the shipped default, a user file and overrides."""
    label = str(config_file) if config_file is not None else "--task"
    file_data = _read_yaml(Path(config_file), label) if config_file is not None else {}
    parsed = [parse_override(item) for item in overrides]
    override_task = next((v for k, v in reversed(parsed) if k == "task"), None)
    chosen = choose_task(file_data, override_task or task, label)

    origins: dict[tuple[str, ...], str] = {}
    default_label = f"shipped {chosen}.yaml"
    merged: dict[str, Any] = {}
    _merge(merged, _read_yaml(shipped_config_path(chosen), default_label), default_label, origins)
    if config_file is not None:
        _merge(merged, file_data, label, origins)
    merged["task"] = chosen
    for key, value in parsed:
        _set_dotted(merged, key, value, origins)
    try:
        return TrainConfig.model_validate(merged)
    except ValidationError as e:
        lines = _format_errors(e, origins, label if config_file is not None else default_label)
        raise ConfigError(
            "invalid trainer config:\n  " + "\n  ".join(lines),
            "fix the fields above (`hpctrain train --print-config` shows the resolved config)",
        ) from None


def dump_config(config: TrainConfig) -> str:
    """The resolved config as YAML, in field order."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)


def shortcut_overrides(
    max_epochs: int | None = None,
    batch_size: int | None = None,
    lr: float | None = None,
    seed: int | None = None,
    scale_lr: str | None = None,
    global_batch: int | None = None,
    max_device_batch: int | None = None,
) -> list[str]:
    """The --set items that the shortcut flags stand for (applied after explicit --set)."""
    pairs = [
        ("trainer.max_epochs", max_epochs),
        ("trainer.batch_size", batch_size),
        ("optim.lr", lr),
        ("seed", seed),
        ("optim.scale_lr", scale_lr),
        ("trainer.global_batch", global_batch),
        ("trainer.max_device_batch", max_device_batch),
    ]
    return [f"{key}={value}" for key, value in pairs if value is not None]
