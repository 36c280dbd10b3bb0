"""custom: your own LightningModule and (optionally) LightningDataModule, named as
'package.module:ClassName' and built with the keyword arguments of the custom section.

Without a data module, the module's own train_dataloader/val_dataloader serve the data.
hpctrain also passes batch_size (per device) to the data module and lr to the module when their
__init__ takes a parameter of that name and the kwargs do not set it. The module drives its own
step: Lightning's DistributedSampler, gradient clipping and accumulation apply, and what is
reported (metrics, batch size, learning rate, the metric best.ckpt follows) is read from the run.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from hpctrain.tasks.registry import Task

if TYPE_CHECKING:
    from hpctrain.tasks.registry import Built
    from hpctrain.trainsettings.sections import TrainSettings

_CLASS_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


def validate(config: TrainSettings) -> None:
    """custom.module is required; both class paths are 'package.module:ClassName'."""
    if config.custom.module is None:
        raise ValueError("custom.module is required for task custom")
    for name in ("module", "datamodule"):
        value = getattr(config.custom, name)
        # Without a data module, the module's own *_dataloader methods serve the data.
        if value is not None and not _CLASS_PATH.match(value):
            raise ValueError(
                f"custom.{name} {value!r} is not of the form 'package.module:ClassName'"
            )


def build(config: TrainSettings, lr: float, chunk: int) -> Built:
    """The user's classes, imported and built (a user module takes one batch per call)."""
    from hpctrain.tasks.parts.userclasses import build_custom

    return build_custom(config.custom, lr, config.trainer.batch_size)


TASK = Task(
    name="custom",
    summary="your LightningModule (and LightningDataModule), as custom.module: 'pkg.mod:Class'",
    settings={
        "seed": 42,
        "custom": {"module": None, "module_kwargs": {}, "datamodule": None,
                   "datamodule_kwargs": {}},
        "trainer": {"max_epochs": 10, "batch_size": 64},
    },
    build=build,
    builtin_step=False,
    validate=validate,
)
