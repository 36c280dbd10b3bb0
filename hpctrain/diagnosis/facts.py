"""What the rules of why read from the evidence: the first finding of a kind, the tasks that
failed, the signal that ended a step, training's progress, who printed a line."""

from __future__ import annotations

from hpctrain.diagnosis.logscan import Finding
from hpctrain.diagnosis.model import Evidence, node_of, where
from hpctrain.values import rundir

# Signals by number, as a researcher reads them.
SIGNALS = {1: "SIGHUP (hang-up)", 2: "SIGINT (interrupt)", 4: "SIGILL (illegal instruction)",
           6: "SIGABRT (abort: an assertion or a C++ exception)", 7: "SIGBUS (bus error)",
           8: "SIGFPE (arithmetic error)", 9: "SIGKILL (killed)",
           11: "SIGSEGV (segmentation fault)", 15: "SIGTERM (asked to stop)"}
# What srun prints when the batch script stops the monitor's step (USR2).
MONITOR_STOP_WORDS = "User defined signal 2"


def first(ev: Evidence, *kinds: str) -> Finding | None:
    return next((f for f in ev.findings if f.kind in kinds), None)


def failed_tasks(ev: Evidence) -> list[Finding]:
    """srun's reports of tasks that exited non-zero or were killed, but for the monitor's
    (the batch script stops it with USR2)."""
    return [f for f in ev.findings
            if (f.kind == "task_signal" and not (ev.monitored and f.info.get("what") ==
                                                 MONITOR_STOP_WORDS))
            or (f.kind == "task_exit" and f.info.get("exit_code") != "0")]


def first_failed_task(ev: Evidence) -> Finding | None:
    return next(iter(failed_tasks(ev)), None)


def step_signal(ev: Evidence) -> int | None:
    """The first signal that ended one of the job's own steps (not the monitor's)."""
    steps = ev.accounting.steps() if ev.accounting else ()
    return next((s.signal for s in steps if s.signal and s.step != "extern"
                 and s.name != rundir.MONITOR_STEP), None)


def with_task(ev: Evidence, found: Finding) -> tuple[str, ...]:
    task = first_failed_task(ev)
    return (where(found),) + ((where(task),) if task is not None else ())


def training_progress(ev: Evidence) -> tuple[int, int, float] | None:
    """(epochs done, epochs asked for, seconds per epoch) from metrics.json."""
    m = ev.metrics or {}
    done, total, times = m.get("epochs_completed"), m.get("max_epochs"), m.get("epoch_times_s")
    if not isinstance(done, int) or not isinstance(total, int) or not done:
        return None
    # Whole epochs as metrics.json timed them (the per-epoch list; else the summary's).
    seconds = [e.get("time_s") for e in m.get("epochs") or [] if isinstance(e, dict)]
    if not seconds and isinstance(times, list):
        seconds = times
    found = [float(t) for t in seconds if isinstance(t, (int, float))]
    return done, total, (sum(found) / len(found) if found else 0.0)


def frame_text(f: Finding) -> str:
    frame = f.user_frame()
    return f" in {frame.file}:{frame.line} ({frame.func})" if frame else ""


def rank_text(ev: Evidence, f: Finding) -> str:
    """`rank 3 on node2` (what is known of who printed `f`), or ''."""
    node = node_of(f, ev)
    who = " on ".join(x for x in (f"rank {f.rank}" if f.rank else None, node) if x)
    return f"{who} " if who else ""
