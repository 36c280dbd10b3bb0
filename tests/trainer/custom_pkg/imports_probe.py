"""A user's module that writes, when training starts, which of the optional packages the
process has imported by then (tests/trainer/test_trainer_lean.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .blobs import BlobClassifier

# What torchmetrics' full __init__ imports and the trainer does not use (issue 43).
WATCHED = (
    "torchmetrics.functional", "torchmetrics.functional.image", "torchmetrics.functional.text",
    "torchmetrics.image", "torchmetrics.text", "torchmetrics.audio", "scipy.signal",
    "torchvision", "transformers",
)


class ReportingClassifier(BlobClassifier):
    """BlobClassifier that writes the WATCHED modules already imported to `report`."""

    def __init__(self, report: str, lr: float = 0.1, width: int = 16) -> None:
        super().__init__(lr=lr, width=width)
        self.report = report

    def on_train_start(self) -> None:
        imported = sorted(m for m in WATCHED if m in sys.modules)
        Path(self.report).write_text(json.dumps(imported))
