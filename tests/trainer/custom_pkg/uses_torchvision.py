"""A user's module that uses torchvision (where it is installed: the realistic environment)."""

from __future__ import annotations

import torch
import torchvision

from .imports_probe import ReportingClassifier


class BoxIoUClassifier(ReportingClassifier):
    """Logs torchvision's box IoU of boxes with themselves: 1.0."""

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        super().validation_step(batch, batch_idx)
        boxes = torch.tensor([[0.0, 0.0, 2.0, 2.0], [1.0, 1.0, 4.0, 3.0]])
        self.log("val_box_iou", torchvision.ops.box_iou(boxes, boxes).diagonal().mean())
