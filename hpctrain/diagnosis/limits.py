"""Why rules of the job's limits: its time limit (and the trainer's safe stop at its warning),
and its host memory, each with what to ask for instead."""

from __future__ import annotations

import math

from hpctrain.diagnosis.facts import first, training_progress
from hpctrain.diagnosis.model import Diagnosis, Evidence, where
from hpctrain.slurm.accounting import Row
from hpctrain.slurm.states import JobState
from hpctrain.values import rundir
from hpctrain.values.units import format_time


def _time_fix(ev: Evidence, last: Row) -> str:
    progress, limit = training_progress(ev), last.time_limit_s
    if progress is None or not limit:
        return ("ask for more time (`--time`), or let hpctrain's trainer save and continue in "
                "a chain (`--chain 3`) or by requeueing")
    done, total, per = progress
    left = max(total - done, 0) * per
    need = math.ceil((limit + left) * 1.2 / 60) * 60
    segments = max(2, math.ceil((done / max(ev.chain, 1) + (total - done)) / max(done, 1)) + 1)
    return (f"`--time {format_time(need)}` (training had {done} of {total} epochs at about "
            f"{per:.0f} s each, {format_time(int(left))} left, plus 20 %), or "
            f"`--chain {segments}` to go on in segments of {format_time(limit)}")


def time_limit(ev: Evidence, last: Row) -> Diagnosis | None:
    said = first(ev, "time_limit")
    if last.state is not JobState.TIMEOUT and said is None:
        return None
    runs = len(ev.accounting.runs) if ev.accounting else 1
    progress = training_progress(ev)
    got = f"; training reached epoch {progress[0]} of {progress[1]}" if progress else ""
    requeued = f" after {runs - 1} requeue(s)" if runs > 1 else ""
    return Diagnosis(
        "time_limit",
        f"the job ran out of its time limit ({format_time(last.time_limit_s or 0)}){requeued}"
        f"{got}", _time_fix(ev, last),
        evidence=tuple(filter(None, (f"sacct: State {last.slurm_state}, Elapsed "
                                     f"{format_time(last.elapsed_s or 0)}",
                                     where(said) if said else None))))


def stopped(ev: Evidence, last: Row) -> Diagnosis | None:
    """The packaged trainer's safe stop: saved and stopped, and no requeue or segment after."""
    m = ev.metrics or {}
    ends = [r.get("end") for r in m.get("restarts") or [] if isinstance(r, dict)]
    end = ends[-1] if ends and isinstance(ends[-1], dict) else None
    if m.get("status") != "stopped" or end is None or last.state is not JobState.COMPLETED:
        return None
    reason = str(end.get("reason") or "")
    progress = training_progress(ev)
    got = f" at epoch {progress[0]} of {progress[1]}" if progress else ""
    said = first(ev, "warned_stop")
    warned = said is not None or reason == "SIGUSR1"
    return Diagnosis(
        "time_limit" if warned else "stopped",
        ("the trainer stopped at the time limit's warning" if warned else
         f"the trainer was asked to stop ({reason})") + f" and saved its checkpoint{got}; no "
        "requeue or later segment took the run up", _time_fix(ev, last) if warned else
        "submit the next part with `--chain N`, or let it requeue (`--requeue`, the default)",
        evidence=tuple(filter(None, (f"{rundir.METRICS}: status stopped, reason {reason}, "
                                     f"checkpoint {end.get('checkpoint')}",
                                     where(said) if said else None))))


def _node_peak(ev: Evidence) -> str:
    """The monitor's fullest node: its memory peak against its size (all of the node's
    processes, the job's among them), or that none was measured."""
    nodes = [n for n in (ev.monitor or {}).get("nodes") or []
             if n.get("mem_peak_mib") and n.get("mem_total_mib")]
    if not nodes:
        return "no peak measured"
    top = max(nodes, key=lambda n: n["mem_peak_mib"] / n["mem_total_mib"])
    return (f"{top['node']}'s memory peaked at {top['mem_peak_mib']:.0f} of "
            f"{top['mem_total_mib']:.0f} MiB in the monitor's samples")


def host_memory(ev: Evidence, last: Row) -> Diagnosis | None:
    said = first(ev, "host_oom")
    if last.state is not JobState.OUT_OF_MEMORY and said is None:
        return None
    peak = max((r.max_rss_mb or 0 for r in (ev.accounting.steps() if ev.accounting else ())),
               default=0) or None
    asked = last.req_mem_mb
    facts = f"{peak:.0f} MiB at the peak SLURM measured" if peak else _node_peak(ev)
    mem = f"`--mem {math.ceil((peak or asked or 0) * 1.5 / 1024)}G`" if (peak or asked) \
        else "more `--mem`"
    return Diagnosis(
        "host_memory",
        f"the job ran out of host memory ({facts}"
        f"{f' of {asked:.0f} MiB asked for' if asked else ''})",
        f"{mem}, or fewer data loader workers / a smaller batch per node",
        evidence=tuple(filter(None, (f"sacct: State {last.slurm_state}",
                                     where(said) if said else None))))
