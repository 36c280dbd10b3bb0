"""In-job restarts (`--restarts`, docs/long-runs.md, "Restarts inside the job"): how often a
failed or stalled launch step starts again inside its allocation before the job goes on as
without them (it fails; a stall's --retries, a node's failure: SLURM's requeue).

The packaged trainer resumes from its last checkpoint, so its jobs restart by default; a
command of one's own starts again from its beginning, so only when asked.
"""

from __future__ import annotations

from collections.abc import Sequence

from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.restart import runs_trainer

MAX_RESTARTS = 20
TRAINER_DEFAULT = 2


def restarts_policy(req: JobRequest, command: Sequence[str]) -> Outcome[int]:
    """The restarts the job's step gets: the user's, checked, else the command's default."""
    trainer = runs_trainer(command)
    if req.restarts is None:
        return Outcome(TRAINER_DEFAULT if trainer else 0)
    if not 0 <= req.restarts <= MAX_RESTARTS:
        return Outcome(req.restarts, (f"--restarts {req.restarts}: give 0 to {MAX_RESTARTS} "
                                      "(0: a failed rank ends the job)",))
    notes: tuple[str, ...] = ()
    if req.restarts and not trainer:
        notes = (f"--restarts {req.restarts} starts your command again from its beginning "
                 "inside the job: it resumes only from a checkpoint it reads itself "
                 "(docs/long-runs.md, \"Restarts inside the job\")",)
    return Outcome(req.restarts, notes=notes)
