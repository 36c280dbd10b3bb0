"""Rules for runs longer than a time limit: the warning signal, requeue, chains, dependencies.

Only the packaged trainer knows the stop protocol (docs/trainer.md, "Safe stop and requeue"),
so only its jobs get the warning signal and --requeue; chains and --after work for any command.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hpctrain.plan.model import TRAINER_COMMAND, JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.values.units import TIME_FORMS, format_time

MAX_CHAIN = 100
# Seconds of warning the trainer may ask for: enough to write one checkpoint, and not an hour.
MIN_GRACE_S, MAX_GRACE_S = 10, 3600
_JOB_ID = re.compile(r"^[0-9]+(_[0-9]+)?$")
# What the stop protocol writes itself for a trainer job; a pass-through would contradict it.
_PROTOCOL_OPTIONS = {
    "--signal": "--grace SECONDS", "--requeue": "the profile's requeue.allowed",
    "--no-requeue": "--no-requeue", "--open-mode": "nothing (logs are appended across requeues)",
}


@dataclass(frozen=True)
class Restart:
    """How the job outlives its time limit."""

    grace_s: int | None
    requeue: bool
    chain: int
    after: tuple[str, ...]


def runs_trainer(command: Sequence[str]) -> bool:
    """True when the job runs the packaged trainer (which saves and stops on the signal)."""
    return tuple(command[: len(TRAINER_COMMAND)]) == TRAINER_COMMAND


def restart_policy(req: JobRequest, command: Sequence[str], time_s: int) -> Outcome[Restart]:
    """The warning signal and requeue for trainer jobs; the chain and dependencies for all."""
    trainer = runs_trainer(command)
    grace = grace_for(req, trainer, time_s)
    problems = [*grace.problems, *_chain_problems(req)]
    if trainer:
        problems += _protocol_clashes(req.sbatch_args)
    allowed = req.profile.requeue.allowed
    notes = list(grace.notes)
    if trainer and req.requeue and not allowed:
        notes.append(f"--no-requeue: {req.profile.cluster} does not allow requeueing jobs; "
                     "use --chain N to carry a long run on")
    restart = Restart(grace.value, trainer and req.requeue and allowed, req.chain,
                      tuple(req.after))
    return Outcome(restart, tuple(problems), notes=tuple(notes))


def grace_for(req: JobRequest, trainer: bool, time_s: int) -> Outcome[int | None]:
    """The trainer's warning before the time limit: the user's, checked; else the profile's,
    shrunk to fit a job shorter than it."""
    if not trainer:
        return Outcome(None, () if req.grace_s is None else (
            "--grace applies to the packaged trainer, which saves a checkpoint on SLURM's "
            "warning; drop it (or pass --sbatch-arg=--signal=... for your own command)",))
    if req.grace_s is None:
        return _default_grace(req.profile.requeue.grace_s, time_s)
    if not MIN_GRACE_S <= req.grace_s <= MAX_GRACE_S:
        return Outcome(req.grace_s, (f"--grace {req.grace_s}: give {MIN_GRACE_S} to "
                                     f"{MAX_GRACE_S} seconds (long enough to write one "
                                     "checkpoint)",))
    if time_s > 0 and req.grace_s >= time_s:
        return Outcome(req.grace_s, (
            f"--grace {req.grace_s} s is not shorter than --time {format_time(time_s)}: the job "
            f"would be warned before it starts; use --grace {_fitted(time_s)} or a longer "
            f"--time ({TIME_FORMS})",))
    return Outcome(req.grace_s)


def _default_grace(grace: int, time_s: int) -> Outcome[int | None]:
    # A profile's grace is sized for long jobs; one that would warn a short trial run in its
    # first half is shrunk rather than refused (the user never asked for it).
    if time_s <= 0 or 2 * grace <= time_s:
        return Outcome(grace)
    fitted = _fitted(time_s)
    if fitted >= time_s:
        return Outcome(grace, (f"--time {format_time(time_s)} is too short for the packaged "
                               f"trainer: it needs over {MIN_GRACE_S} s to save a checkpoint "
                               f"on SLURM's warning ({TIME_FORMS})",))
    return Outcome(fitted, notes=(
        f"--grace {fitted}: the profile's {grace} s is too long for --time "
        f"{format_time(time_s)}; the trainer is warned {fitted} s before the end instead "
        "(pass --grace to choose)",))


def _fitted(time_s: int) -> int:
    return max(MIN_GRACE_S, time_s // 4)


def _chain_problems(req: JobRequest) -> list[str]:
    problems = []
    if not 1 <= req.chain <= MAX_CHAIN:
        problems.append(f"--chain {req.chain}: give 1 to {MAX_CHAIN} segments")
    bad = [a for a in req.after if not _JOB_ID.match(a)]
    if bad:
        problems.append(f"--after {','.join(map(repr, bad))}: give SLURM job ids, e.g. "
                        "--after 1234 or --after 1234,1235")
    return problems


def _protocol_clashes(sbatch_args: Sequence[str]) -> list[str]:
    names = {a.split("=", 1)[0] for a in sbatch_args}
    return [
        f"--sbatch-arg {name}: hpctrain sets it for the packaged trainer; use {why}"
        for name, why in _PROTOCOL_OPTIONS.items()
        if name in names
    ]
