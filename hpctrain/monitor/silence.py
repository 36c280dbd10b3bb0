"""How long a job has been silent, and how long a silence its own rhythm allows.

A program that reports its progress (hpctrain.progress: the packaged trainer, or one call in a
program of one's own) is silent since its last report, and its window is STEP_FACTOR step
times. Any other program is silent since its output last grew, and its window is what its
output's rhythm allows: STEP_FACTOR times the usual gap between growths, and twice the longest
gap seen (a validation pass, a checkpoint). Both within the floor and the ceiling.
"""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path

STEP_FACTOR = 20.0
FLOOR_S = 120.0
CEILING_S = 1800.0
_KEEP_GAPS = 64


def clamp(window: float) -> float:
    return min(CEILING_S, max(FLOOR_S, window))


@dataclass
class OutputRhythm:
    """The job's output files watched at each check: when they last grew, and the gaps."""

    files: tuple[Path, ...]
    size: int = -1
    grew_at: float | None = None
    gaps: list[float] = field(default_factory=list)

    def look(self, now: float) -> None:
        """Note whether the output grew since the last look."""
        size = 0
        for path in self.files:
            try:
                size += os.stat(path).st_size
            except OSError:
                continue
        if size > self.size:
            if self.grew_at is not None and self.size >= 0:
                self.gaps = (self.gaps + [now - self.grew_at])[-_KEEP_GAPS:]
            self.grew_at = now
        self.size = max(size, self.size)

    def silent_s(self, now: float, since: float) -> float:
        """Seconds since the output last grew (or since `since`, whichever is later)."""
        return now - max(self.grew_at or since, since)

    def window_s(self) -> float:
        """The silence this output's rhythm allows."""
        if len(self.gaps) < 2:
            return FLOOR_S
        return clamp(max(STEP_FACTOR * statistics.median(self.gaps), 2 * max(self.gaps)))
