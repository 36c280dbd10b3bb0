"""The built-in modules' backward and optimizer step without Lightning's per-step hook calls.

Lightning's manual_backward and LightningOptimizer.step call three hooks on every callback and on
the module (on_before_backward, on_after_backward, on_before_optimizer_step) through its profiler,
about a tenth of a small model's step on a CPU. When nothing in the run overrides them and the
precision plugin adds nothing to backward or step (32-true, bf16-mixed: no gradient scaler),
those calls do nothing, and the steps below do exactly what Lightning's would: the strategy's
pre/post backward (DDP's reducer), the backward, and the step counted in trainer.global_step.
"""

from __future__ import annotations

import lightning as L
import torch
from lightning.pytorch.core.optimizer import LightningOptimizer
from lightning.pytorch.plugins.precision import MixedPrecision, Precision
from lightning.pytorch.utilities.model_helpers import is_overridden

HOOKS = ("on_before_backward", "on_after_backward", "on_before_optimizer_step")


def hooks_do_nothing(trainer: L.Trainer) -> bool:
    """Whether Lightning's backward and step hooks would do nothing in this run."""
    plugin = trainer.precision_plugin
    if type(plugin) not in (Precision, MixedPrecision) or getattr(plugin, "scaler", None):
        return False
    if trainer.gradient_clip_val:
        return False
    module = trainer.lightning_module
    if any(is_overridden(h, module, L.LightningModule) for h in (*HOOKS, "backward")):
        return False
    callbacks: list[L.Callback] = getattr(trainer, "callbacks", [])
    return not any(is_overridden(h, cb, L.Callback) for cb in callbacks for h in HOOKS)


def backward(trainer: L.Trainer, loss: torch.Tensor) -> None:
    """manual_backward without the hook calls."""
    strategy = trainer.strategy
    strategy.pre_backward(loss)
    loss.backward()
    strategy.post_backward(loss)


def step(optimizer: LightningOptimizer) -> None:
    """LightningOptimizer.step without the hook calls; still counted as a step."""
    optimizer._on_before_step()
    optimizer.optimizer.step()
    optimizer._on_after_step()


def count_step(optimizer: LightningOptimizer) -> None:
    """Count a step taken outside the optimizer's own call (a replayed CUDA graph's)."""
    optimizer._on_before_step()
    optimizer._on_after_step()
