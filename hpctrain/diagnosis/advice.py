"""What to ask for next time: what the job used against what it asked for, with a rule each.

The thresholds follow practice: the notes Princeton's jobstats gives each job flag GPU
utilisation under 15 to 25 %, CPU efficiency under 65 to 80 %, time used under 10 to 60 % of
the limit and memory use under 70 %. hpctrain takes one value from each range, named in every
note. Pure: evidence in, notes out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hpctrain.monitor.stats import MEM_LOW_SHARE
from hpctrain.slurm.accounting import Accounting, Row
from hpctrain.slurm.states import JobState
from hpctrain.values.units import format_time

TIME_USED_LOW = 0.5
MEMORY_USED_LOW = 0.7
CPU_EFFICIENCY_LOW = 0.65
GPU_UTIL_LOW_PCT = 25.0
# Shorter runs are mostly start-up (imports, rendezvous): their averages judge nothing.
MIN_JUDGED_S = 60


@dataclass(frozen=True)
class Advice:
    """A setting the job used, what it asked or a rule expects, and what to change."""

    what: str
    used: str
    asked: str
    rule: str
    suggestion: str | None  # None: nothing to change

    def as_dict(self) -> dict[str, object]:
        return {"what": self.what, "used": self.used, "asked": self.asked, "rule": self.rule,
                "suggestion": self.suggestion}


def _time(last: Row) -> Advice | None:
    if not last.elapsed_s or not last.time_limit_s or last.state is not JobState.COMPLETED:
        return None
    share = last.elapsed_s / last.time_limit_s
    rule = f"a finished job that used under {TIME_USED_LOW:.0%} of its limit"
    need = max(300, math.ceil(last.elapsed_s * 1.5 / 60) * 60)
    return Advice("time", f"{format_time(last.elapsed_s)} ({share:.0%})",
                  format_time(last.time_limit_s), rule,
                  f"`--time {format_time(need)}` (1.5 x what it used): shorter jobs start "
                  "sooner" if share < TIME_USED_LOW else None)


def _memory(acct: Accounting, last: Row) -> Advice | None:
    peaks = [s.max_rss_mb for s in acct.steps() if s.max_rss_mb]
    if not last.req_mem_mb:
        return None
    rule = f"under {MEMORY_USED_LOW:.0%} of the memory asked for"
    if not peaks:
        return Advice("host memory", "not measured (SLURM gathers no memory use here: "
                      "JobAcctGatherType)", f"{last.req_mem_mb:.0f} MiB", rule, None)
    peak = max(peaks)
    share = peak / last.req_mem_mb
    return Advice("host memory", f"{peak:.0f} MiB at the peak ({share:.0%})",
                  f"{last.req_mem_mb:.0f} MiB", rule,
                  f"`--mem {math.ceil(peak * 1.3)}M` (1.3 x the peak)"
                  if share < MEMORY_USED_LOW else None)


def _cpu(last: Row) -> Advice | None:
    if not last.total_cpu_s or not last.cpus or not last.elapsed_s \
            or last.elapsed_s < MIN_JUDGED_S:
        return None
    share = last.total_cpu_s / (last.elapsed_s * last.cpus)
    busy = max(1, math.ceil(last.total_cpu_s / last.elapsed_s * 1.25))
    return Advice("CPU efficiency", f"{share:.0%} of {last.cpus} CPUs busy on average",
                  f"{last.cpus} CPUs", f"under {CPU_EFFICIENCY_LOW:.0%} busy",
                  f"fewer CPUs (about {busy} in all: `--cpus-per-task`), or more data loader "
                  "workers if the GPUs waited for data" if share < CPU_EFFICIENCY_LOW else None)


def _gpu(monitor: Mapping[str, Any] | None) -> Advice | None:
    mean = (monitor or {}).get("gpu_util_mean_pct")
    if not isinstance(mean, (int, float)):
        return None
    return Advice("GPU utilisation", f"{mean:.0f} % on average", "all GPUs of the job",
                  f"under {GPU_UTIL_LOW_PCT:.0f} %",
                  "fewer GPUs, or find what starves them (`hpctrain stats JOB`: data "
                  "loading, small batches)" if mean < GPU_UTIL_LOW_PCT else None)


def _gpu_memory(monitor: Mapping[str, Any] | None) -> Advice | None:
    """The fullest GPU's memory peak against its size (the monitor's readings)."""
    gpus = [g for n in (monitor or {}).get("nodes") or [] for g in n.get("gpus") or []
            if g.get("mem_peak_mib") is not None and g.get("mem_total_mib")]
    if not gpus:
        return None
    top = max(gpus, key=lambda g: g["mem_peak_mib"] / g["mem_total_mib"])
    share = top["mem_peak_mib"] / top["mem_total_mib"]
    return Advice("GPU memory", f"at most {top['mem_peak_mib']:.0f} MiB ({share:.0%})",
                  f"{top['mem_total_mib']:.0f} MiB per GPU",
                  f"at most {MEM_LOW_SHARE:.0%} of a GPU's memory (the monitor's rule)",
                  "a larger batch per GPU fits (`trainer.batch_size`; with "
                  "`trainer.global_batch`, fewer GPUs for the same batch)"
                  if share <= MEM_LOW_SHARE else None)


def advise(acct: Accounting | None, monitor: Mapping[str, Any] | None) -> list[Advice]:
    """Each measure there is data for, with its suggestion (None where it was right)."""
    last = acct.last if acct else None
    if acct is None or last is None or not last.state.is_terminal:
        return []
    found = [_time(last), _memory(acct, last), _cpu(last), _gpu(monitor),
             _gpu_memory(monitor)]
    return [a for a in found if a is not None]
