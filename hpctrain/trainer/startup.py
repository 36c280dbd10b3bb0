"""Start-up time: from the start of this process to the first training step.

The process start comes from the kernel (/proc/self/stat on Linux), so it includes the
interpreter's own start and every import. A second run in the same process (tests, benchmarks)
measures from its run_training call instead. This module imports neither torch nor Lightning.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpctrain.timeline import process_start

PROCESS_START = "process start"
RUN_CALL = "run_training call"

_claimed = False


def origin(run_started: float) -> tuple[float, str]:
    """Where this run's start-up is measured from (wall time), and what that point is."""
    global _claimed
    first, _claimed = not _claimed, True
    start = process_start() if first else None
    if start is None:
        return run_started, RUN_CALL
    return start, PROCESS_START


@dataclass(frozen=True)
class StartupRecord:
    """Seconds from `startup_from` to the first training step, and of that the imports."""

    startup_s: float | None = None
    startup_from: str | None = None
    startup_imports_s: float | None = None


@dataclass(frozen=True)
class Origin:
    """Where start-up is measured from (wall time), what that point is, when imports were done."""

    at: float
    label: str
    imported_at: float | None = None


class FirstStepClock:
    """Start-up, taken once: at the first training step's start (on_train_batch_start)."""

    def __init__(self, origin: Origin | None) -> None:
        self._origin = origin
        self.record = StartupRecord()

    def tick(self, now: float) -> StartupRecord | None:
        """Called at every step's start: the new record at the first, None after."""
        origin, self._origin = self._origin, None
        if origin is None:
            return None
        imported = origin.imported_at
        self.record = StartupRecord(
            startup_s=now - origin.at,
            startup_from=origin.label,
            startup_imports_s=imported - origin.at if imported is not None else None,
        )
        return self.record
