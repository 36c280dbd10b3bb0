"""A built-in task's optimizer step replayed as one CUDA graph: forward, loss, backward, step.

A small model's step on a GPU is bound by the CPU launching some forty kernels one by one (about
2 ms per step for the spiral MLP on an H100 host, whatever the batch). Captured once as a graph,
the step is one launch. The graph replays the kernels an eager step runs, on the same parameters
and optimizer state: SGD's numbers are the eager step's; Adam's step counter lives on the device,
where its bias correction is float32 instead of the CPU's double, so its numbers are close to
the eager step's (about 1e-3 relative after a few epochs), not bit-equal.

It applies where the step is the same every time and nothing outside it must run in between:
one process on one GPU (DDP's all-reduce is not captured), 32-bit precision (no gradient
scaler), no gradient clipping or accumulation, none of Lightning's backward or step hooks
overridden, and an optimizer that can be captured (SGD, Adam, AdamW). A batch of another size
(an epoch's last, short one) takes the eager step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning as L
import torch
from lightning.pytorch.plugins.precision import Precision

from hpctrain.tasks.parts import fastpath

CAPTURABLE = (torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW)
# Eager steps on a side stream before the capture, as PyTorch's capture recipe asks (cuBLAS and
# cuDNN pick and allocate their workspaces outside the graph); they are real training steps.
WARMUP_STEPS = 3

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def unavailable(trainer: L.Trainer, module: Any, optimizer: torch.optim.Optimizer) -> str | None:
    """Why this run's step cannot be a CUDA graph, or None when it can."""
    if trainer.strategy.root_device.type != "cuda":
        return "not on a GPU"
    if trainer.world_size > 1:
        return f"{trainer.world_size} processes (DDP's all-reduce is not captured; one GPU only)"
    if type(trainer.precision_plugin) is not Precision:
        return f"precision {trainer.precision} (32-true only)"
    if module.gradient_clip_val is not None:
        return "gradient clipping"
    if module.accumulate > 1:
        return "gradient accumulation"
    if not isinstance(optimizer, CAPTURABLE):
        return f"optimizer {type(optimizer).__name__} (SGD, Adam and AdamW only)"
    if not fastpath.hooks_do_nothing(trainer):
        return "a callback or the module overrides Lightning's backward or step hooks"
    return None


def make_capturable(optimizer: torch.optim.Optimizer) -> None:
    """Adam's step counter on the device, where a graph can count; a no-op for SGD.

    Done after Lightning restored a checkpoint: one saved by an eager run holds CPU counters.
    """
    for group in optimizer.param_groups:
        if "capturable" not in group:
            continue
        group["capturable"] = True
        for param in group["params"]:
            step = optimizer.state.get(param, {}).get("step")
            if isinstance(step, torch.Tensor) and step.device != param.device:
                optimizer.state[param]["step"] = step.to(param.device, torch.float32)


class GraphedStep:
    """Optimizer steps of one batch size: eager warm-up steps, then one capture, then replays."""

    def __init__(
        self, net: torch.nn.Module, loss_fn: Loss, optimizer: torch.optim.Optimizer, batch: int
    ) -> None:
        self.net, self.loss_fn, self.optimizer, self.batch = net, loss_fn, optimizer, batch
        self._steps = 0
        self._graph: torch.cuda.CUDAGraph | None = None
        self._x = self._y = self._loss_sum = torch.empty(0)

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """One optimizer step on (x, y); returns the batch's summed loss (on the device)."""
        if self._graph is None and self._steps < WARMUP_STEPS:
            self._steps += 1
            return self._warm_up(x, y)
        if self._graph is None:
            self._capture(x, y)
        assert self._graph is not None
        self._x.copy_(x)
        self._y.copy_(y)
        self._graph.replay()
        return self._loss_sum

    def _step(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss_sum = self.loss_fn(self.net(x), y)
        (loss_sum / self.batch).backward()
        self.optimizer.step()
        return loss_sum

    def _warm_up(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self._steps == 1:
            make_capturable(self.optimizer)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.optimizer.zero_grad(set_to_none=True)
            loss_sum = self._step(x, y).detach()
        torch.cuda.current_stream().wait_stream(side)
        return loss_sum

    def _capture(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self._x, self._y = x.clone(), y.clone()
        # Gradients allocated inside the capture belong to the graph's pool: every replay writes
        # them afresh instead of adding to them.
        self.optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._loss_sum = self._step(self._x, self._y).detach()
        self._graph = graph
