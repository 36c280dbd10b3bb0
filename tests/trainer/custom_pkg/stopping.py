"""A user module that asks for a stop itself at a given step: a deterministic mid-epoch signal."""

from __future__ import annotations

import os
import signal
from typing import Any

from .blobs import BlobClassifier


class SignallingBlobClassifier(BlobClassifier):
    """BlobClassifier that sends a signal to its own process after one given global step."""

    def __init__(
        self, lr: float = 0.1, width: int = 16, signal_at_step: int = -1, signal_name: str = "USR1"
    ) -> None:
        super().__init__(lr=lr, width=width)
        self.signal_at_step, self.signal_name = signal_at_step, signal_name

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.global_step == self.signal_at_step:
            os.kill(os.getpid(), getattr(signal, f"SIG{self.signal_name}"))
