"""The trainer's marks on the start-up timeline (hpctrain.timeline) that Lightning's hooks
place: the process group formed, the data ready, the first step."""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.strategies import DDPStrategy

from hpctrain import timeline


class MarkedDDPStrategy(DDPStrategy):
    """Lightning's DDP, marking when the process group has formed (all ranks have joined)."""

    def setup_distributed(self) -> None:
        super().setup_distributed()
        timeline.mark(timeline.GROUP_FORMED)


class StartupMarks(L.Callback):
    """Data ready: the training data loader is built and the model is on its device (Lightning's
    on_train_start, after the sanity check); first step: the first batch is in hand."""

    def __init__(self) -> None:
        self._stepped = False

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        timeline.mark(timeline.DATA_READY)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule,
                             batch: Any, batch_idx: int) -> None:
        if not self._stepped:
            self._stepped = True
            timeline.mark(timeline.FIRST_STEP)
