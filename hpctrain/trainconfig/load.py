"""Build a run's settings: the task's defaults, the user's file, command-line overrides.

Shared by the trainer (inside a job) and the job side (which checks a --config before it
queues), so it lives beside both rather than inside the trainer.

A run's config is built in layers, later ones winning:

1. the task's defaults (the ``settings`` of its declaration, ``hpctrain/tasks/<task>.py``),
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
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from hpctrain.errors import ConfigError
from hpctrain.files import yamlread
from hpctrain.tasks import registry
from hpctrain.trainconfig.model import TASKS, TrainConfig
from hpctrain.values.spelling import did_you_mean

_KEY = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


def _read_yaml(path: Path, label: str) -> dict[str, Any]:
    try:
        data = yamlread.load(yamlread.read_text(path))
    except yamlread.YamlInputError as e:
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
        value = yamlread.load(raw) if raw.strip() else None
    except yamlread.YamlInputError as e:
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
            message = "unknown field" + did_you_mean(loc[-1], _section_fields(loc[:-1]))
        elif item["type"] not in ("missing",) and loc:
            message += f" (got {item.get('input')!r})"
        lines.append(f"{_origin(loc, origins, default)}: {where}: {message}")
    return lines


def _section_fields(loc: tuple[str, ...]) -> list[str]:
    """The field names of the section at `loc` ([] where it is no section)."""
    model: Any = TrainConfig
    for part in loc:
        info = model.model_fields.get(part)
        model = info.annotation if info is not None else None
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return []
    return list(model.model_fields)


def choose_task(file_data: dict[str, Any], task: str | None, label: str) -> str:
    """The task of this run: --task, else the file's task:, else the default task."""
    file_task = file_data.get("task")
    if task is not None and file_task is not None and task != file_task:
        raise ConfigError(
            f"--task {task} conflicts with 'task: {file_task}' in {label}",
            "drop --task or change the file",
        )
    chosen = task or file_task or registry.DEFAULT_TASK
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
    """Build the validated config from the task's defaults, a user file and overrides."""
    label = str(config_file) if config_file is not None else "--task"
    file_data = _read_yaml(Path(config_file), label) if config_file is not None else {}
    parsed = [parse_override(item) for item in overrides]
    override_task = next((v for k, v in reversed(parsed) if k == "task"), None)
    chosen = choose_task(file_data, override_task or task, label)

    origins: dict[tuple[str, ...], str] = {}
    default_label = f"{chosen}'s defaults"
    merged: dict[str, Any] = {}
    _merge(merged, registry.get(chosen).defaults(), default_label, origins)
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


def task_defaults(task: str) -> dict[str, Any]:
    """A task's defaults as plain data with every field: the model's defaults under the task's
    layer (not validated: custom's lacks the module that every custom config names)."""
    data = TrainConfig().model_dump()
    _merge(data, registry.get(task).defaults(), "", {})
    return data
