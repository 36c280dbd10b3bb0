"""Start-up time: from the start of this process to the first training step.

The process start comes from the kernel (/proc/self/stat on Linux), so it includes the
interpreter's own start and every import. A second run in the same process (tests, benchmarks)
measures from its run_training call instead. This module imports neither torch nor Lightning.
"""

from __future__ import annotations

import os
import time

PROCESS_START = "process start"
RUN_CALL = "run_training call"

_claimed = False


def process_age() -> float | None:
    """Seconds since this process started, or None where the kernel does not say."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        # The command name may hold spaces and parentheses: the fields follow the last ')'.
        start_ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    # A time namespace or a container runtime can skew the two clocks; no figure beats a wrong one.
    return age if 0 <= age < 86400 * 365 else None


def origin(run_started: float) -> tuple[float, str]:
    """Where this run's start-up is measured from (wall time), and what that point is."""
    global _claimed
    first, _claimed = not _claimed, True
    age = process_age() if first else None
    if age is None:
        return run_started, RUN_CALL
    return time.time() - age, PROCESS_START
