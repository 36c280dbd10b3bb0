"""The built-in networks (the tutorials' spiral MLP and MNIST CNN) and their optimizer.

Plain torch, no Lightning: the benchmark's plain loop builds the same networks without paying
for Lightning's imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

# Settings are read, never built, here: no pydantic at import.
if TYPE_CHECKING:
    from hpctrain.trainsettings.sections import OptimConfig



def spiral_mlp(hidden: list[int], inputs: int = 2, classes: int = 2) -> nn.Sequential:
    """The MLP of the Raven tutorial: Linear+ReLU per hidden layer, then a linear head."""
    layers: list[nn.Module] = []
    width = inputs
    for size in hidden:
        layers += [nn.Linear(width, size), nn.ReLU()]
        width = size
    layers.append(nn.Linear(width, classes))
    return nn.Sequential(*layers)


class TutorialCNN(nn.Module):
    """The CNN of the MNIST tutorials: conv 32, conv 64, max-pool, dropout, fc 128, fc 10."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, 1),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3, 1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Dropout(0.25),
            nn.Flatten(),
        )
        self.head = nn.Sequential(
            nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def build_optimizer(params: Any, optim: OptimConfig, lr: float) -> torch.optim.Optimizer:
    """The optimizer named in the config, at learning rate `lr` (already scaled)."""
    if optim.name == "sgd":
        return torch.optim.SGD(
            params, lr=lr, momentum=optim.momentum, weight_decay=optim.weight_decay
        )
    if optim.name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=optim.weight_decay)
    return torch.optim.Adam(params, lr=lr, weight_decay=optim.weight_decay)
