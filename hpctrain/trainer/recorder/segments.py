"""The run's segments (one per start) and how each ended: completed, stopped or failed."""

from __future__ import annotations

from dataclasses import replace

from hpctrain.trainer.records import (
    CompletedEnd,
    FailedEnd,
    RestartRecord,
    SegmentEnd,
    StoppedEnd,
)


class Segments:
    """Every start of the run, this one last; this one's end is recorded once it is known."""

    def __init__(self, restarts: list[RestartRecord]) -> None:
        self.restarts = list(restarts)

    def _end(self, end: SegmentEnd) -> None:
        if self.restarts:
            self.restarts[-1] = replace(self.restarts[-1], end=end)

    def stopped(self, end: StoppedEnd) -> None:
        self._end(end)

    def completed(self, epochs: int) -> None:
        self._end(CompletedEnd(epochs=epochs))

    def failed(self, exception: BaseException) -> None:
        self._end(FailedEnd(error=f"{type(exception).__name__}: {exception}".strip()))
