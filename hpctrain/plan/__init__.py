"""Profile + topology + options -> a validated job plan (pure: no files, no processes)."""

from hpctrain.plan.build import build_plan
from hpctrain.plan.inputs import secret_like
from hpctrain.plan.model import TRAINER_COMMAND, JobPlan, JobRequest, Launcher
from hpctrain.plan.sbatch import sbatch_option_name

__all__ = [
    "TRAINER_COMMAND",
    "JobPlan",
    "JobRequest",
    "Launcher",
    "build_plan",
    "sbatch_option_name",
    "secret_like",
]
