"""A user's module that uses a torchmetrics domain, imported at its top as users write it."""

from __future__ import annotations

import torch
from torchmetrics.image import StructuralSimilarityIndexMeasure

from .imports_probe import ReportingClassifier


class SSIMClassifier(ReportingClassifier):
    """Logs the SSIM metric object itself (Lightning's torchmetrics path): 1.0 for an image
    against itself."""

    def __init__(self, report: str, lr: float = 0.1, width: int = 16) -> None:
        super().__init__(report, lr=lr, width=width)
        self.ssim = StructuralSimilarityIndexMeasure(data_range=1.0)

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        super().validation_step(batch, batch_idx)
        image = torch.rand(2, 1, 16, 16, generator=torch.Generator().manual_seed(batch_idx))
        self.ssim(image, image)
        self.log("val_ssim", self.ssim, on_epoch=True)
