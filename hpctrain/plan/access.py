"""The rule for who pays: the account (the constraint is the node-type rule's)."""

from __future__ import annotations

from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.sbatch import asked
from hpctrain.plan.text import IDENT, unsafe_name


def choose_account(req: JobRequest) -> Outcome[str | None]:
    """The account: --account, else SBATCH_ACCOUNT, else the profile's default; some
    clusters require one, some refuse it."""
    profile = req.profile
    found = asked(req.account, "--account", req.shell, "SBATCH_ACCOUNT")
    account, asked_by, notes = found.value, found.by, found.notes
    if account is None:
        account, asked_by = profile.default_account, "default_account"
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
        drop = "drop it" if asked_by == "--account" else "unset SBATCH_ACCOUNT"
        return Outcome(account, problems=(
            f"{profile.name}: jobs on {profile.cluster} take no account ({asked_by} "
            f"{account}); {drop}",
        ), notes=notes)
    return Outcome(account, unsafe_name(account, IDENT, asked_by), notes=notes)
