"""The stall watch's settings (docs/long-runs.md, "Hangs"): the window and what ends a stall.

The watch is a thread of the monitor on every node (hpctrain.monitor.stall), so it needs the
monitor; it reads the ranks' progress (hpctrain.progress), which the packaged trainer reports
and a program of one's own reports with one call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.restart import runs_trainer

ACTIONS = ("cancel", "requeue", "report")
# A window shorter than this mistakes a slow first step or a checkpoint for a hang.
MIN_WINDOW_S = 10


MAX_RETRIES = 10


@dataclass(frozen=True)
class StallWatch:
    """`window`: '' (derived from the step time), 'off', or seconds; `action`: on a stall;
    `retries`: how often a fault's job is submitted again without its node."""

    window: str
    action: str
    retries: int = 0


def stall_policy(req: JobRequest, command: Sequence[str]) -> Outcome[StallWatch]:
    """The watch the job asked for, checked; a note where it cannot watch or cannot resume."""
    monitored, trainer = req.monitor_interval_s is not None, runs_trainer(command)
    window = (req.stall_window or "").strip().lower()
    action = req.on_stall
    problems: list[str] = []
    if window not in ("", "auto", "off") and not (window.isdigit()
                                                   and int(window) >= MIN_WINDOW_S):
        problems.append(f"--stall-window {req.stall_window!r}: give whole seconds, at least "
                        f"{MIN_WINDOW_S} (e.g. --stall-window 600), or 'off'")
    if action not in ACTIONS:
        problems.append(f"--on-stall {action!r}: choose one of {', '.join(ACTIONS)}")
    notes = []
    watching = window != "off"
    if watching and not monitored and (req.stall_window or action != "cancel"):
        notes.append("no stall watch: it runs in the monitor, which --no-monitor turns off")
    if watching and monitored and action == "requeue" and not trainer:
        notes.append("--on-stall requeue runs your command again from its start: only the "
                     "packaged trainer resumes from its checkpoint")
    problems += _retry_problems(req)
    return Outcome(StallWatch("" if window == "auto" else window, action, req.retries),
                   tuple(problems), notes=tuple(notes))


def _retry_problems(req: JobRequest) -> list[str]:
    """--retries submits the same script again: one job, not a chain, a race or a sweep."""
    if not req.retries:
        return []
    if not 0 < req.retries <= MAX_RETRIES:
        return [f"--retries {req.retries}: give 1 to {MAX_RETRIES}"]
    shared = ("--chain" if req.chain > 1 else "a sweep" if req.array is not None
              else "--first-of" if req.race else None)
    if shared:
        return [f"--retries applies to one job; {shared} shares its run directory with other "
                f"jobs, which a retry would run beside: drop --retries or {shared}"]
    return []
