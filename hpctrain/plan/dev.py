"""A dev job's plan (`hpctrain dev`, docs/dev.md): the batch job's request, holding its
allocation for an interactive shell instead of launching the command. Pure."""

from __future__ import annotations

import dataclasses

from hpctrain.plan.model import JobPlan, JobRequest


def dev_plan(plan: JobPlan, req: JobRequest) -> JobPlan:
    """`plan` as a dev job: the same allocation and environment, without what only a launched
    command needs (the time limit's warning and requeue, the stall watch, restarts, retries,
    a chain), waiting for its shell up to the profile's idle time."""
    # The stall watch would take a quiet shell for a hung job and cancel it, so the monitor
    # samples without it; the batch job's warning asks a trainer to save and stop, and the dev
    # job's own tells the shell instead.
    note = ("a dev job holds its allocation for a shell: no stall watch, restarts or retries "
            "of its own (the monitor samples), and its time limit's warning goes to the shell; "
            "`hpctrain submit --like-dev JOB` takes them for the batch job")
    return dataclasses.replace(
        plan, grace_s=None, requeue=False, chain=1, after=(), stall_window="off",
        restarts=0, retries=0, dev_idle_s=req.profile.dev_idle_s,
        dev_warn_s=dev_warning_s(plan.time_seconds), notes=(*plan.notes, note))


def dev_warning_s(time_seconds: int) -> int:
    """How long before the time limit the dev shell is warned: 5 minutes, or a quarter of a
    short job's time, never under a minute (SLURM sends the signal up to ~30 s late)."""
    return min(300, max(60, time_seconds // 4))


def batch_request(req: JobRequest) -> JobRequest:
    """A dev job's request as a batch job (`submit --like-dev`): the same options, launched,
    on a snapshot of the project as it is now."""
    return dataclasses.replace(req, dev=False, snapshot=True, chain=1, after=())
