"""The spiral task's points, generated from the seed (plain torch, no Lightning)."""

from __future__ import annotations

import math

import torch


def make_spiral(
    samples: int, noise: float, turns: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two interleaved spiral arms in 2-D (class 0 and 1), shuffled; the same for every seed."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(samples) % 2
    # sqrt spreads the points evenly over the disc instead of crowding the centre.
    t = torch.rand(samples, generator=g).sqrt()
    angle = t * turns * 2 * math.pi + labels * math.pi
    points = torch.stack([t * torch.cos(angle), t * torch.sin(angle)], dim=1)
    points += noise * torch.randn(samples, 2, generator=g)
    order = torch.randperm(samples, generator=g)
    return points[order].float(), labels[order]
