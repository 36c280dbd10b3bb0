"""A rank's process as /proc shows it: whether it runs, and the CPU time it has used.

Pure parse of /proc/<pid>/stat, and its read (standard library: the watcher runs in jobs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcStat:
    """One read of a process: its state letter (R running, S sleeping, T stopped, ...) and its
    CPU seconds (user and system)."""

    state: str
    cpu_s: float

    @property
    def stopped(self) -> bool:
        """Stopped by a signal (SIGSTOP, SIGTSTP) or by a tracer."""
        return self.state in ("T", "t")


def parse_stat(text: str, ticks: float) -> ProcStat:
    """/proc/<pid>/stat's state and utime + stime. The command name (field 2) may hold spaces
    and parentheses, so the fields are counted after its last ')'."""
    rest = text[text.rindex(")") + 2:].split()
    return ProcStat(rest[0], (int(rest[11]) + int(rest[12])) / ticks)


def read_stat(pid: int) -> ProcStat | None:
    """The process `pid` now (None: it has ended, or /proc does not show it)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        return parse_stat(text, float(os.sysconf("SC_CLK_TCK")))
    except (OSError, ValueError, IndexError):
        return None
