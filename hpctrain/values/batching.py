"""A global batch split over the devices: per-device batch x world size x accumulation = N (pure).

The plan checks a request with it (submit/render `--global-batch`), the trainer applies it at
run time with the world size it really got: both use these rules, so they agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpctrain.errors import ConfigError

# The nearest valid batch is looked for this far on each side; beyond, the fix names the rule.
_SEARCH = 1 << 16


@dataclass(frozen=True)
class BatchSplit:
    """How a global batch is made: per_device samples on each of world_size, accumulated."""

    global_batch: int
    world_size: int
    per_device: int
    accumulation: int

    def as_dict(self) -> dict[str, int]:
        return {"global_batch": self.global_batch, "world_size": self.world_size,
                "batch_size_per_device": self.per_device,
                "accumulate_grad_batches": self.accumulation,
                "effective_batch_size": self.per_device * self.world_size * self.accumulation}


def _fits(n: int, world: int, cap: int | None, accumulation: int | None) -> BatchSplit | None:
    """The split with the least accumulation that makes `n` exactly, or None."""
    choices = [accumulation] if accumulation else range(1, n // world + 1)
    for acc in choices:
        per, rest = divmod(n, world * acc)
        if rest == 0 and per >= 1 and (cap is None or per <= cap):
            return BatchSplit(n, world, per, acc)
    return None


def _nearest(n: int, world: int, cap: int | None, accumulation: int | None) -> list[int]:
    """The closest valid global batch below and above `n` (each where one exists)."""
    below = next((m for m in range(n - 1, max(n - _SEARCH, 0), -1)
                  if _fits(m, world, cap, accumulation)), None)
    above = next((m for m in range(n + 1, n + _SEARCH)
                  if _fits(m, world, cap, accumulation)), None)
    if accumulation and cap is not None and n > world * accumulation * cap:
        above = None
    return [m for m in (below, above) if m is not None]


def split_batch(global_batch: int, world_size: int, max_device_batch: int | None = None,
                accumulation: int | None = None) -> BatchSplit:
    """The split of `global_batch` over `world_size` devices; ConfigError with the nearest
    valid global batch where there is none.

    `accumulation` fixed (the config's trainer.accumulate_grad_batches) or None: the least
    that keeps the per-device batch at most `max_device_batch`.
    """
    for name, value in (("the global batch", global_batch), ("the world size", world_size),
                        ("the per-device cap", max_device_batch), ("accumulation", accumulation)):
        if value is not None and value < 1:
            raise ConfigError(f"{name} must be at least 1, not {value}")
    split = _fits(global_batch, world_size, max_device_batch, accumulation)
    if split is not None:
        return split
    near = _nearest(global_batch, world_size, max_device_batch, accumulation)
    acc = f" x accumulation {accumulation}" if accumulation else " x accumulation"
    cap = f", at most {max_device_batch} per device" if max_device_batch else ""
    raise ConfigError(
        f"global batch {global_batch} cannot be split over {world_size} device(s){cap}: it "
        f"must be a multiple of {world_size} (devices){acc}",
        f"use a global batch of {' or '.join(map(str, near))}" if near else
        "raise the per-device cap or lower the accumulation",
    )
