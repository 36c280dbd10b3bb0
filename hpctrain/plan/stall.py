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
from hpctrain.profiles.model import Partition

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


def profile_size(part: Partition) -> int | None:
    """How many nodes the partition has, as its profile says (None: the profile does not)."""
    counts = [t.nodes for t in part.node_types]
    if not counts or any(c is None for c in counts):
        return None
    return sum(c for c in counts if c is not None)


def retry_room(req: JobRequest, part: Partition, nodes: int) -> Outcome[None]:
    """A problem where no retry could leave a node out: the job needs every node of its
    partition (as SLURM listed them for the submit, else as the profile says)."""
    if not req.retries:
        return Outcome(None)
    listed = None if req.partition_nodes is None else req.partition_nodes.get(part.name)
    size = len(set(listed)) if listed is not None else profile_size(part)
    if size is None or nodes < size:
        return Outcome(None)
    # The watcher's retry is `sbatch --exclude=NODE`, which SLURM refuses for a job that
    # needs every node of its partition: the retry would never run, and say so only in a log.
    fix = (f"ask for at most {size - 1} node(s), or drop --retries" if size > 1
           else "drop --retries")
    return Outcome(None, misfits=(
        f"--retries {req.retries}: a retry runs without the stalled node, but the job needs "
        f"{nodes} of partition {part.name}'s {size} node(s), so SLURM would refuse every "
        f"retry: {fix}",))
