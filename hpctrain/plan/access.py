"""Rules for who pays and which nodes: the account and the constraint."""

from __future__ import annotations

from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.text import CONSTRAINT, IDENT, unsafe_name
from hpctrain.profiles.model import Partition


def choose_account(req: JobRequest) -> Outcome[str | None]:
    """The account: the profile's default unless given; some clusters require one, some refuse."""
    profile = req.profile
    account = req.account if req.account is not None else profile.default_account
    if account is None:
        if profile.account != "required":
            return Outcome(None)
        return Outcome(None, problems=(
            f"{profile.name}: an account is required on {profile.cluster}; use --account NAME "
            f"(or set default_account in a user profile that extends {profile.name})",
        ))
    if profile.account == "never":
        return Outcome(account, problems=(
            f"{profile.name}: jobs on {profile.cluster} take no --account; drop it",
        ))
    return Outcome(account, unsafe_name(account, IDENT, "--account"))


def choose_constraint(req: JobRequest, part: Partition, nodes: int) -> Outcome[str | None]:
    """The constraint: the partition's default unless given; a given one must exist there."""
    constraint = req.constraint or part.default_constraint
    if req.constraint is None:
        return Outcome(constraint)
    problems = unsafe_name(req.constraint, CONSTRAINT, "--constraint")
    if problems:
        return Outcome(constraint, problems)
    name = req.profile.name
    found = part.constraint(req.constraint)
    if found is None:
        known = ", ".join(x.name for x in part.constraints) or "none"
        return Outcome(constraint, misfits=(
            f"{name}: partition {part.name} has no constraint {req.constraint!r}; known: {known}",
        ))
    if found.max_nodes is not None and nodes > found.max_nodes:
        return Outcome(constraint, misfits=(
            f"{name}: only {found.max_nodes} node(s) per job with --constraint {found.name}; "
            f"use --nodes {found.max_nodes}",
        ))
    return Outcome(constraint)
