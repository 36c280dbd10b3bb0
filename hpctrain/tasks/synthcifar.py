"""synthcifar: CIFAR-10-shaped synthetic images (3x32x32, 10 classes), generated from the seed on
the device, classified by a small CNN in hpctrain's Classifier.

No download: each class is a smooth colour pattern (a random 4x4 grid per channel, upscaled to
40x40), and each image a random 32x32 window of its class's pattern at a random contrast, over a
random background of the same kind (twice as strong), plus Gaussian noise of standard deviation
data.noise. The small CNN reaches a validation accuracy of about 0.75 in its first epoch on a CPU
(chance: 0.1) and climbs slowly from there, so it stands in for CIFAR-10 where a real dataset is
not at hand: an image task with convolutions for tests, benchmarks and a first run on a cluster.
It is also the worked example of adding a task (docs/trainer-tasks.md, "Adding a task").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpctrain.tasks.registry import classifier_task

if TYPE_CHECKING:
    import torch

    from hpctrain.tasks.registry import Built
    from hpctrain.trainsettings.sections import TrainSettings

CLASSES = 10
SIZE = 32
# The patterns are larger than the images, so that where a window falls varies per image.
PATTERN = 40


def make_images(samples: int, noise: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`samples` images (N, 3, 32, 32) and their labels, shuffled; a seed always gives the same."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(seed)
    grid = torch.randn(CLASSES, 3, 4, 4, generator=g)
    patterns = F.interpolate(grid, size=PATTERN, mode="bicubic", align_corners=False)
    patterns = (patterns - patterns.mean((1, 2, 3), keepdim=True)) / patterns.std(
        (1, 2, 3), keepdim=True
    )
    labels = torch.arange(samples) % CLASSES
    rows, cols = torch.randint(0, PATTERN - SIZE + 1, (2, samples), generator=g).tolist()
    windows = zip(labels.tolist(), rows, cols, strict=True)
    images = torch.stack([patterns[c, :, r : r + SIZE, k : k + SIZE] for c, r, k in windows])
    images *= 0.5 + torch.rand(samples, 1, 1, 1, generator=g)
    # A background of the patterns' own kind, different in every image and stronger than the
    # class's pattern, makes the class a pattern to find rather than a colour to read off.
    backgrounds = torch.randn(samples, 3, 4, 4, generator=g)
    images += 2 * F.interpolate(backgrounds, size=SIZE, mode="bicubic", align_corners=False)
    images += noise * torch.randn(images.shape, generator=g)
    order = torch.randperm(samples, generator=g)
    return images[order], labels[order]


def small_cnn() -> torch.nn.Module:
    """Three 3x3 conv blocks (8, 16, 32 channels; 32 -> 16 -> 8 -> 4 pixels), then fc 10."""
    from torch import nn

    layers: list[nn.Module] = []
    width = 3
    for channels in (8, 16, 32):
        layers += [nn.Conv2d(width, channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
        width = channels
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(width * 4 * 4, CLASSES))


def batches_per_call(batch_size: int, device: str) -> int:
    """As mnist's CNN: one batch per call on a CPU (its step is long enough), on a GPU 2048
    samples' worth."""
    return max(1, min(64, (2048 if device == "gpu" else 0) // batch_size))


def build(config: TrainSettings, lr: float, chunk: int) -> Built:
    """The small CNN in hpctrain's Classifier, and the images on the device."""
    from hpctrain.tasks.parts.classifier import classifier_for
    from hpctrain.tasks.parts.datasets.generated import GeneratedDataModule

    d = config.data
    data = GeneratedDataModule(
        lambda: make_images(d.samples, d.noise, config.seed),
        d.val_fraction, config.trainer.batch_size, config.seed, chunk,
    )
    return classifier_for(small_cnn(), config, lr), data


TASK = classifier_task(
    name="synthcifar",
    summary="CIFAR-10-shaped synthetic images (3x32x32, 10 classes) from the seed, a small CNN",
    settings={
        "seed": 42,
        # 4,000 training images: an epoch takes seconds on a CPU.
        "data": {"samples": 5000, "val_fraction": 0.2, "noise": 1.0},
        "optim": {"name": "adam", "lr": 0.003},
        "trainer": {"max_epochs": 5, "batch_size": 64},
    },
    build=build,
    batches_per_call=batches_per_call,
)
