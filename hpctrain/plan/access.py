"""The rule for who pays: the account (the constraint is the node-type rule's)."""

from __future__ import annotations

from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.text import IDENT, unsafe_name


def choose_account(req: JobRequest) -> Outcome[str | None]:
    """The account: the profile's default unless given; some clusters require one, some refuse."""
    profile = req.profile
    account = req.account if req.account is not None else profile.default_account
    if account is None:
        if profile.account != "required":
            return Outcome(None)
        fix = (f"--account NAME (or set default_account in a user profile that extends "
               f"{profile.name})")
        if req.preview:
            return Outcome(None, notes=(
                f"{profile.cluster} requires an account and this script names none: add "
                f"{fix} before submitting it",))
        return Outcome(None, problems=(
            f"{profile.name}: an account is required on {profile.cluster}; use {fix}",))
    if profile.account == "never":
        return Outcome(account, problems=(
            f"{profile.name}: jobs on {profile.cluster} take no --account; drop it",
        ))
    return Outcome(account, unsafe_name(account, IDENT, "--account"))
