"""Facts read from the run itself: samples in a batch, the loaders' batch size, learning rates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import lightning as L
import torch

from hpctrain.trainer.records import UNKNOWN, Facts, LearningRate
from hpctrain.values import rundir

# What samples/s counts, in the banner and metrics.json.
SAMPLES_COUNTED_AS = (
    "len(batch) of each training batch as delivered (of a tuple, list or dict: of its first "
    "tensor), summed over the ranks"
)


def batch_size_of(batch: Any) -> int | None:
    """The number of samples in a batch as a loader delivered it, or None if it cannot tell."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.ndim else 1
    if isinstance(batch, Mapping):
        sizes = (batch_size_of(v) for v in batch.values())
        return next((s for s in sizes if s is not None), None)
    if isinstance(batch, (list, tuple)):
        if not batch:
            return 0
        if isinstance(batch[0], (torch.Tensor, Mapping, list, tuple)):
            return batch_size_of(batch[0])
        # A collated list of plain items (strings, numbers): one per sample.
        return len(batch)
    return None


def _loader_batch_size(loader: Any) -> int | None:
    size = getattr(loader, "batch_size", None)
    if size is None:
        # DataLoader(batch_sampler=...) leaves batch_size None; the sampler knows.
        size = getattr(getattr(loader, "batch_sampler", None), "batch_size", None)
    return size if isinstance(size, int) and size > 0 else None


def train_batch_size(trainer: L.Trainer) -> int | None:
    """The per-device batch size of the (single) training loader, after Lightning set it up."""
    loaders: Any = trainer.train_dataloader
    if isinstance(loaders, Mapping):
        loaders = list(loaders.values())
    if isinstance(loaders, Sequence) and not isinstance(loaders, (str, bytes)):
        # Several loaders are combined per step in ways the loader objects do not show.
        return _loader_batch_size(loaders[0]) if len(loaders) == 1 else None
    return _loader_batch_size(loaders)


def learning_rates(trainer: L.Trainer) -> list[list[float]]:
    """Every optimizer's param-group learning rates, as they are now."""
    return [[float(g["lr"]) for g in opt.param_groups] for opt in trainer.optimizers]


def lr_value(rates: list[list[float]]) -> LearningRate:
    """One number when the run has one learning rate, else one entry per optimizer."""
    if not rates or not any(rates):
        return UNKNOWN
    per_optimizer = [group[0] if len(set(group)) == 1 else group for group in rates]
    return per_optimizer[0] if len(per_optimizer) == 1 else per_optimizer


def lr_text(rates: list[list[float]]) -> str:
    """The learning rate(s) for the banner: 0.1, or 0.001,0.0002 for two optimizers."""
    value = lr_value(rates)
    if isinstance(value, str):
        return value

    def one(v: Any) -> str:
        return "/".join(f"{x:g}" for x in v) if isinstance(v, list) else f"{v:g}"

    return ",".join(one(v) for v in value) if isinstance(value, list) else one(value)


def optimizer_text(trainer: L.Trainer) -> str:
    """Where the learning rate comes from: the optimizers' and schedulers' class names."""
    names = [type(o).__name__ for o in trainer.optimizers]
    if not names:
        return "the module configures no optimizer"
    text = f"{', '.join(names)} from configure_optimizers"
    schedulers = [type(c.scheduler).__name__ for c in trainer.lr_scheduler_configs]
    if schedulers:
        text += f", then {', '.join(schedulers)}: each epoch's in {rundir.METRICS}"
    return text


@runtime_checkable
class DeclaresBatching(Protocol):
    """A data module that says how it serves batches; the built-in ones do, others need not."""

    @property
    def batches_per_call(self) -> int:
        """Batches (optimizer steps) per training_step call."""
        ...

    @property
    def data_on_device(self) -> bool | None:
        """Whether the data is held on the training device (no DataLoader)."""
        ...


def read_facts(trainer: L.Trainer) -> Facts:
    """Batch size and learning rates as the run has them (loaders and optimizers set up)."""
    batch = train_batch_size(trainer)
    rates = learning_rates(trainer)
    acc = trainer.accumulate_grad_batches
    module = trainer.lightning_module
    if not module.automatic_optimization:
        # The built-in modules optimize manually and accumulate themselves.
        acc = getattr(module, "accumulate", acc)
    effective = batch * trainer.world_size * acc if batch else None
    data = getattr(trainer, "datamodule", None)
    declared = data if isinstance(data, DeclaresBatching) else None
    return Facts(
        batch_size_per_device=batch or UNKNOWN,
        accumulate_grad_batches=acc,
        batches_per_call=declared.batches_per_call if declared else 1,
        data_on_device=declared.data_on_device if declared else None,
        # Built-in modules: "on", or "off: <why>" (trainer.cuda_graphs).
        cuda_graphs=getattr(module, "cuda_graphs_state", None),
        effective_batch_size=effective or UNKNOWN,
        learning_rate=lr_value(rates),
        learning_rate_text=lr_text(rates),
        optimizers=optimizer_text(trainer),
        samples_counted_as=SAMPLES_COUNTED_AS,
    )
