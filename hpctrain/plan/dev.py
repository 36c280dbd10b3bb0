"""A dev job's plan (`hpctrain dev`, docs/dev.md): the batch job's request, holding its
allocation for an interactive shell instead of launching the command. Pure."""

from __future__ import annotations

import dataclasses

from hpctrain.plan.model import JobPlan, JobRequest


def dev_plan(plan: JobPlan, req: JobRequest) -> JobPlan:
    """`plan` as a dev job: the same allocation and environment, without what only a launched
    command needs (the time limit's warning and requeue, the monitor's stall watch, restarts,
    retries, a chain), waiting for its shell up to the profile's idle time."""
    # The stall watch would take a quiet shell for a hung job and cancel it; the warning
    # signal would end the waiting script without a trap for it.
    note = ("a dev job holds its allocation for a shell: no time limit's warning, monitor, "
            "restarts or retries of its own; `hpctrain submit --like-dev JOB` takes them for "
            "the batch job")
    return dataclasses.replace(
        plan, grace_s=None, requeue=False, chain=1, after=(), monitor_interval_s=None,
        restarts=0, retries=0, dev_idle_s=req.profile.dev_idle_s, notes=(*plan.notes, note))


def batch_request(req: JobRequest) -> JobRequest:
    """A dev job's request as a batch job (`submit --like-dev`): the same options, launched,
    on a snapshot of the project as it is now."""
    return dataclasses.replace(req, dev=False, snapshot=True, chain=1, after=())
