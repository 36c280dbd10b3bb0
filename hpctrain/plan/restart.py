"""Rules for runs longer than a time limit: the warning signal, requeue, chains, dependencies.

Only the packaged trainer knows the stop protocol (docs/trainer.md, "Time limits"), so only its
jobs get the warning signal and --requeue; chains and --after work for any command.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hpctrain.plan.model import TRAINER_COMMAND, JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.units import format_time

MAX_CHAIN = 100
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
    problems = [*_grace_problems(req, trainer, time_s), *_chain_problems(req)]
    if trainer:
        problems += _protocol_clashes(req.sbatch_args)
    allowed = req.profile.requeue.allowed
    notes = []
    if trainer and req.requeue and not allowed:
        notes.append(f"--no-requeue: {req.profile.cluster} does not allow requeueing jobs; "
                     "use --chain N to carry a long run on")
    grace = (req.grace_s or req.profile.requeue.grace_s) if trainer else None
    restart = Restart(grace, trainer and req.requeue and allowed, req.chain, tuple(req.after))
    return Outcome(restart, tuple(problems), notes=tuple(notes))


def _grace_problems(req: JobRequest, trainer: bool, time_s: int) -> list[str]:
    if req.grace_s is None:
        grace = req.profile.requeue.grace_s if trainer else None
    elif not trainer:
        return ["--grace applies to the packaged trainer, which saves a checkpoint on SLURM's "
                "warning; drop it (or pass --sbatch-arg=--signal=... for your own command)"]
    elif not 10 <= req.grace_s <= 3600:
        return [f"--grace {req.grace_s}: give 10 to 3600 seconds (long enough to write one "
                "checkpoint)"]
    else:
        grace = req.grace_s
    if grace is not None and time_s > 0 and grace >= time_s:
        return [f"--grace {grace} s is not shorter than --time {format_time(time_s)}: the job "
                f"would be warned before it starts; use --grace {max(10, time_s // 4)} or a "
                "longer --time"]
    return []


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
