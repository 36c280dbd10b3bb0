"""A node's CPU and memory from /proc (stdlib only: the sampler runs beside the training)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")
PROC_MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True)
class CpuTimes:
    """The aggregate `cpu` line of /proc/stat, in clock ticks."""

    busy: int
    total: int


@dataclass(frozen=True)
class Memory:
    """What /proc/meminfo says, in MiB (MemTotal, and used = total - MemAvailable)."""

    total_mib: float
    used_mib: float


def parse_proc_stat(text: str) -> CpuTimes:
    """The `cpu` line: idle and iowait are idle, the rest busy; guest time is inside user."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            ticks = [int(v) for v in parts[1:]]
            # guest and guest_nice (fields 9 and 10) are already counted in user and nice.
            counted = ticks[:8]
            idle = counted[3] + (counted[4] if len(counted) > 4 else 0)
            return CpuTimes(busy=sum(counted) - idle, total=sum(counted))
    raise ValueError("/proc/stat has no aggregate 'cpu' line")


def parse_meminfo(text: str) -> Memory:
    """MemTotal and MemAvailable (kB) as MiB; without MemAvailable (kernels < 3.14) MemFree."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            values[key.strip()] = int(fields[0])
    if "MemTotal" not in values:
        raise ValueError("/proc/meminfo has no MemTotal line")
    total = values["MemTotal"]
    available = values.get("MemAvailable", values.get("MemFree", 0))
    return Memory(total_mib=total / 1024, used_mib=(total - available) / 1024)


def cpu_percent(before: CpuTimes, after: CpuTimes) -> float | None:
    """Busy share of all of the node's CPUs between two readings (None: no time passed)."""
    total = after.total - before.total
    if total <= 0:
        return None
    return max(0.0, min(100.0, 100.0 * (after.busy - before.busy) / total))


def read_cpu() -> CpuTimes:
    return parse_proc_stat(PROC_STAT.read_text(encoding="ascii", errors="replace"))


def read_memory() -> Memory:
    return parse_meminfo(PROC_MEMINFO.read_text(encoding="ascii", errors="replace"))


def cpu_count() -> int:
    return os.cpu_count() or 1


def own_cpu_seconds() -> float:
    """CPU seconds (user + system) this process has used: the sampler's own cost."""
    # getrusage counts in microseconds; os.times() only in clock ticks (10 ms).
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
