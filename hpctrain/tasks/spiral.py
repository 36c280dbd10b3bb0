"""spiral: two interleaved spiral arms in 2-D, generated from the seed, classified by the MLP of
the MPCDF Raven tutorial (hidden layers 64, 32, 16 with ReLU).

The data lives on the device; the defaults reach > 0.99 validation accuracy in a few seconds on
a laptop CPU. The batch is large because it learns the spirals in seconds; the tutorial's 32 per
GPU works as well (--batch-size 32 --lr 0.001): small batches run several per Lightning call
(trainer.batches_per_call), so Lightning's fixed work per call does not dominate the step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpctrain.tasks.registry import classifier_task

if TYPE_CHECKING:
    from hpctrain.tasks.registry import Built
    from hpctrain.trainsettings.sections import TrainSettings


def batches_per_call(batch_size: int, device: str) -> int:
    """Lightning's fixed work per call (~0.5 ms on a 2-core CPU) is as long as a small batch's
    step of the MLP; on a GPU, where its step is launches whatever the batch, as any batch's.
    On a CPU a call takes 32768 samples' worth (~25 ms): Lightning's share stays near 2%, at
    the default batch of 8192 too (one batch per call left it at ~8%), and a stop still waits
    for one call only."""
    if device == "gpu":
        return 64
    return max(1, min(64, 32768 // batch_size))


def build(config: TrainSettings, lr: float, chunk: int) -> Built:
    """The MLP in hpctrain's Classifier, and the spirals on the device."""
    from hpctrain.tasks.parts.classifier import classifier_for
    from hpctrain.tasks.parts.datasets.generated import GeneratedDataModule
    from hpctrain.tasks.parts.datasets.points import make_spiral
    from hpctrain.tasks.parts.networks import spiral_mlp

    d = config.data
    data = GeneratedDataModule(
        lambda: make_spiral(d.samples, d.noise, d.turns, config.seed),
        d.val_fraction, config.trainer.batch_size, config.seed, chunk,
    )
    return classifier_for(spiral_mlp(config.model.hidden), config, lr), data


TASK = classifier_task(
    name="spiral",
    summary="two spiral arms in 2-D, generated from the seed, classified by the tutorial MLP",
    settings={
        "seed": 42,
        "data": {"samples": 200000, "val_fraction": 0.2, "noise": 0.02, "turns": 1.5},
        "model": {"hidden": [64, 32, 16]},
        "optim": {"name": "adam", "lr": 0.02},
        "trainer": {"max_epochs": 20, "batch_size": 8192},
    },
    build=build,
    batches_per_call=batches_per_call,
)
