"""What the user's jobs hold already, for a profile with a budget (plan/budget.py decides).

One SLURM call (`squeue --me`), only where the profile sets `budget_gpu_hours`; through a
login over its one connection.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from hpctrain.errors import SlurmError
from hpctrain.slurm.runner import controller_gone

if TYPE_CHECKING:
    from hpctrain.places import Place
    from hpctrain.plan import JobRequest


def with_budget(req: JobRequest, place: Place) -> JobRequest:
    """`req` with the GPU-hours the user's queued and running jobs hold (None where SLURM
    cannot say: the rule then checks the job alone and says so)."""
    if req.profile.budget_gpu_hours is None:
        return req
    # Here, not above: a profile without a budget (most) spares every submit its import.
    from hpctrain.slurm import availability

    try:
        got = place.slurm_client().run(list(availability.MINE_ARGV))
    except SlurmError as e:
        if controller_gone(e):
            raise
        return req
    return dataclasses.replace(req, held_gpu_hours=availability.held_gpu_hours(got.stdout))
