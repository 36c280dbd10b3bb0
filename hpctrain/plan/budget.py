"""A budget of GPU-hours per cluster (a profile's `budget_gpu_hours`): a job that would, with
the user's queued and running jobs, hold more is refused with the numbers.

Pure: the submit asks SLURM what the user's jobs hold (submission/budget.py); this rule adds
what the job reserves at most (its GPUs for its time limit, each segment of a chain, each task
of an array) and compares.
"""

from __future__ import annotations

from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.values.units import format_time


def reserved_gpu_hours(req: JobRequest, gpus: int, time_s: int) -> float:
    """What a job of `gpus` GPUs for `time_s` holds at most, as planned from `req`."""
    tasks = req.array.size if req.array else 1
    return gpus * time_s / 3600 * max(req.chain, 1) * tasks


def within_budget(req: JobRequest, gpus: int, time_s: int) -> Outcome[None]:
    budget = req.profile.budget_gpu_hours
    if budget is None:
        return Outcome(None)
    job = reserved_gpu_hours(req, gpus, time_s)
    held = req.held_gpu_hours
    if held is None:
        note = ("your other jobs' GPU-hours are not known (SLURM did not say): the budget "
                f"of {budget:g} GPU-hours is checked against this job alone")
        if job <= budget:
            return Outcome(None, notes=(note,))
        held = 0.0
    if job + held <= budget:
        return Outcome(None)
    left = max(budget - held, 0.0)
    return Outcome(None, (
        f"over the budget of {budget:g} GPU-hours on {req.profile.cluster} "
        f"(budget_gpu_hours in profile {req.profile.name}): this job reserves {job:,.1f} "
        f"GPU-hours at most and your queued and running jobs hold {held:,.1f}; {left:,.1f} "
        f"are left: {_fix(req, gpus, left)}",))


def _fix(req: JobRequest, gpus: int, left: float) -> str:
    """The longest --time (whole minutes, at least ten) whose job fits in what is left."""
    per_hour = reserved_gpu_hours(req, gpus, 3600)
    fit = int(left / per_hour * 3600) // 60 * 60 if per_hour else 0
    if fit < 600:
        return ("wait for your jobs to end, or raise budget_gpu_hours in the profile "
                "(`hpctrain status` lists them)")
    return (f"use --time {format_time(fit)}, or fewer GPUs, or raise budget_gpu_hours in the "
            "profile")
