"""The task registry: one `Task` declaration per module of `hpctrain/tasks/`, found by listing.

A task module (`hpctrain/tasks/<name>.py`) defines `TASK = Task(...)`; nothing else names it.
The job side reads the names, defaults and validation from here (before a job queues, and for
`hpctrain --help`), so this module and every task module import neither torch, Lightning,
pydantic nor YAML at module level: a task's `build` imports what it trains with.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import lightning as L

    from hpctrain.trainsettings.sections import TrainSettings

    Built = tuple[L.LightningModule, L.LightningDataModule | None]

# The modules of hpctrain/tasks/ that are not tasks.
_NOT_TASKS = frozenset({"registry"})
# The task a run trains when neither --task nor its config file's `task:` names one.
DEFAULT_TASK = "spiral"
# The metrics of hpctrain's Classifier (tasks/parts/classifier.py), in the order it logs them.
CLASSIFIER_METRICS = ("train_loss", "val_loss", "val_acc")


@dataclass(frozen=True)
class DataFiles:
    """Files a task reads that `hpctrain data fetch <task>` downloads: where they are published
    and the checksums ('md5:…' or 'sha256:…') of the files."""

    base_url: str
    files: Mapping[str, str]


@dataclass(frozen=True)
class Task:
    """What is trained: a task's name, defaults, how it is built and what it reports."""

    name: str
    # One line, for listings and --help.
    summary: str
    # The defaults layer under the user's --config (only the fields that differ from the
    # settings' own defaults; `task` and the best.ckpt metric are added by `defaults()`).
    settings: Mapping[str, Any]
    # (config, learning rate after --scale-lr, batches per training_step call) -> the
    # LightningModule and the LightningDataModule (None: the module serves its own data).
    build: Callable[[TrainSettings, float, int], Built]
    # The metrics each epoch reports, by name; empty: whatever the user's module logs.
    metrics: tuple[str, ...] = ()
    # The metric best.ckpt follows by default and its mode; None: chosen from what is logged.
    best: tuple[str, str] | None = None
    # True: hpctrain's Classifier step drives it (batches per call, CUDA graphs, data on the
    # device, its own data sharding, clipping and accumulation in the module, epoch-only
    # logging). False: the user's module does, with Lightning's sampler, clipping, accumulation.
    builtin_step: bool = True
    # (per-device batch size, accelerator) -> trainer.batches_per_call when it is auto.
    auto_batches_per_call: Callable[[int, str], int] = field(default=lambda batch, device: 1)
    # Files the task reads, fetched on a login node by `hpctrain data fetch`; None: none.
    data_files: DataFiles | None = None
    # Checks of a loaded config beyond the fields' own: raises ValueError with the reason.
    validate: Callable[[TrainSettings], None] | None = None

    def defaults(self) -> dict[str, Any]:
        """The task's defaults layer, as the user's --config would write it."""
        layer: dict[str, Any] = {"task": self.name, **_copy(self.settings)}
        if self.best is not None:
            monitor, mode = self.best
            layer.setdefault("checkpoint", {}).update(monitor=monitor, mode=mode)
        return layer


def classifier_task(name: str, summary: str, settings: Mapping[str, Any],
                    build: Callable[[TrainSettings, float, int], Built],
                    batches_per_call: Callable[[int, str], int],
                    data_files: DataFiles | None = None) -> Task:
    """A task hpctrain's Classifier trains: its metrics, and best.ckpt by validation accuracy."""
    return Task(name, summary, settings, build, metrics=CLASSIFIER_METRICS,
                best=("val_acc", "max"), auto_batches_per_call=batches_per_call,
                data_files=data_files)


def _copy(value: Any) -> Any:
    # Each load merges into its own copy: the declaration stays as shipped.
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


@functools.cache
def all_tasks() -> dict[str, Task]:
    """Every task, by name, in name order: the `TASK` of each module of hpctrain/tasks/."""
    from hpctrain import tasks as package

    found: dict[str, Task] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if not _is_task_module(info):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        task = getattr(module, "TASK", None)
        if not isinstance(task, Task) or task.name != info.name:
            raise TypeError(f"{module.__name__} must define TASK = Task(name={info.name!r}, ...)")
        found[task.name] = task
    return found


def names() -> tuple[str, ...]:
    """The task names, in name order: the modules' names, which all_tasks() holds each
    task's name to, read without importing them (an option's help names them on every
    submit; tests/unit/test_tasks.py checks both agree)."""
    from hpctrain import tasks as package

    return tuple(sorted(info.name for info in pkgutil.iter_modules(package.__path__)
                        if _is_task_module(info)))


def _is_task_module(info: pkgutil.ModuleInfo) -> bool:
    return not (info.ispkg or info.name.startswith("_") or info.name in _NOT_TASKS)


def get(name: str) -> Task:
    """The declaration of the task `name` (a KeyError for an unknown one)."""
    return all_tasks()[name]
