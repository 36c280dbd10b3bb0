"""What rank 0 prints: the banner, notes, one line per epoch (in batch logs), the done line."""

from __future__ import annotations

from collections.abc import Callable

import lightning as L

from hpctrain.trainer.recorder.lines import epoch_line
from hpctrain.trainer.records import EpochRecord, Facts

Banner = Callable[[L.Trainer, Facts], str]


class Console:
    """Prints on rank 0 only; epoch lines only where no progress bar runs."""

    def __init__(self, banner: Banner, epoch_lines: bool) -> None:
        self._banner, self.epoch_lines = banner, epoch_lines

    def say(self, trainer: L.Trainer, line: str) -> None:
        if trainer.is_global_zero:
            print(line, flush=True)

    def banner(self, trainer: L.Trainer, facts: Facts) -> None:
        """What the run is: printed when training starts (or when it has nothing to train)."""
        if trainer.is_global_zero:
            print(self._banner(trainer, facts), flush=True)

    def epoch(self, trainer: L.Trainer, record: EpochRecord) -> None:
        if self.epoch_lines:
            self.say(trainer, epoch_line(record, trainer.max_epochs))
