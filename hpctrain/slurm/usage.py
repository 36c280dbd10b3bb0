"""What a user's accounts have used lately, their fair share, and what the user's jobs hold now.

Pure: the text of one `sacct` (every allocation the accounting shows you since a date: user,
account, allocated TRES, start, end), one `sshare` (your associations and their fair share), one
`sprio --weights` (whether fair share orders the queue at all) and one `squeue --me` in, one
`Usage` out. The commands go in one round trip (`SlurmClient.usage`).

A job's GPU-hours are its allocated GPUs times the part of its run inside the period, so a job
that began before the period counts only from its start. Sites that set `PrivateData=jobs` show
you only your own jobs: the account's total is then what you can see, and says so.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from hpctrain.slurm import availability

# Your associations as a tree: each account's own line (no user: its shares and usage among
# the accounts), then yours in it (your fair share, which orders your jobs).
SSHARE_ARGV = ("sshare", "--noheader", "--parsable2",
               "--format", "Account,User,NormShares,EffectvUsage,FairShare")
SPRIO_ARGV = ("sprio", "--weights")
_GPUS = re.compile(r"(?:^|,)gres/gpu=(\d+)")
_TYPED_GPUS = re.compile(r"(?:^|,)gres/gpu:[^=,]+=(\d+)")


def sacct_argv(since: float) -> tuple[str, ...]:
    """Every allocation the accounting shows you that ran after `since` (epoch seconds)."""
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since))
    return ("sacct", "--allusers", "--allocations", "--noheader", "--parsable2",
            f"--starttime={start}", "--endtime=now", "--state=CA,CD,DL,F,NF,OOM,PR,R,RQ,TO",
            "--format=User,Account,AllocTRES,Start,End")


@dataclass(frozen=True)
class AccountUsage:
    """An account's GPU-hours and fair share, as the accounting shows them."""

    account: str
    gpu_hours: float  # every job of the account the accounting shows you
    your_gpu_hours: float | None  # None: who you are is not known (sshare did not answer)
    fair_share: float | None  # sshare's FairShare of your association; None: not known
    shares: float | None  # the account's normalised shares (NormShares)
    usage: float | None  # its normalised effective usage (EffectvUsage)

    def as_dict(self) -> dict[str, object]:
        return {"account": self.account, "gpu_hours": round(self.gpu_hours, 3),
                "your_gpu_hours": None if self.your_gpu_hours is None
                else round(self.your_gpu_hours, 3), "fair_share": self.fair_share,
                "norm_shares": self.shares, "effective_usage": self.usage}


@dataclass(frozen=True)
class Usage:
    """What the user's accounts used and hold, and what orders the queue."""

    since: float
    accounts: tuple[AccountUsage, ...]  # your associations (or the accounts of your jobs)
    held_gpu_hours: float | None  # what your queued and running jobs hold; None: not known
    fair_share_orders: bool | None  # None: sprio did not say
    ordering: str  # what orders the queue, as sprio says
    unavailable: str | None = None  # why the accounting gave no usage

    def as_dict(self) -> dict[str, object]:
        return {"since": self.since, "accounts": [a.as_dict() for a in self.accounts],
                "held_gpu_hours": None if self.held_gpu_hours is None
                else round(self.held_gpu_hours, 3),
                "fair_share_orders_queue": self.fair_share_orders, "ordering": self.ordering,
                "accounting_unavailable": self.unavailable}


def job_gpus(tres: str) -> int:
    """Allocated GPUs in an AllocTRES field (`gres/gpu=4`, or only typed `gres/gpu:a100=4`)."""
    m = _GPUS.search(tres)
    return int(m.group(1)) if m else sum(int(n) for n in _TYPED_GPUS.findall(tres))


def _epoch(text: str) -> float | None:
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None  # Unknown, None: not started, or still running


def gpu_hours(sacct: str, since: float, now: float) -> dict[str, dict[str, float]]:
    """{account: {user: GPU-hours inside [since, now]}} from sacct_argv's lines."""
    used: dict[str, dict[str, float]] = {}
    for line in sacct.splitlines():
        cols = line.split("|")
        if len(cols) != 5:
            continue
        user, account, tres, start_text, end_text = cols
        start, gpus = _epoch(start_text), job_gpus(tres)
        if start is None or not gpus:
            continue
        end = _epoch(end_text) or now
        seconds = max(min(end, now) - max(start, since), 0.0)
        per_user = used.setdefault(account, {})
        per_user[user] = per_user.get(user, 0.0) + gpus * seconds / 3600
    return used


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def associations(sshare: str) -> list[tuple[str, str, float | None, float | None, float | None]]:
    """Your associations in SSHARE_ARGV's lines: (account, user, the account's shares and
    usage among its siblings, your fair share in it)."""
    accounts: dict[str, tuple[float | None, float | None]] = {}
    found = []
    for line in sshare.splitlines():
        cols = [c.strip() for c in line.split("|")]
        if len(cols) != 5 or not cols[0]:
            continue
        account, user, shares, use, fair = cols
        if not user:
            accounts[account] = (_number(shares), _number(use))
        else:
            found.append((account, user, *accounts.get(account, (None, None)), _number(fair)))
    return found


def fair_share_orders(sprio_code: int, sprio_out: str) -> tuple[bool | None, str]:
    """Whether the queue is ordered by fair share, and what says so: sprio shows the weights
    of the multifactor plugin (a factor's column only where its weight is not zero), and
    refuses under priority/basic."""
    if sprio_code == 0:
        if re.search(r"\bFAIRSHARE\b", sprio_out):
            return True, "priority/multifactor with a fair-share weight"
        return False, "priority/multifactor without a fair-share weight"
    if "priority/basic" in sprio_out:
        return False, "priority/basic: first come, first served"
    return None, "sprio did not answer"


def usage(since: float, now: float, sacct: str | None, sshare: str | None,
          sprio: tuple[int, str], mine: str | None, unavailable: str | None = None) -> Usage:
    """One Usage from the four answers (None: that command failed)."""
    used = gpu_hours(sacct, since, now) if sacct is not None else {}
    mine_rows = associations(sshare) if sshare is not None else []
    me = mine_rows[0][1] if mine_rows else None
    names = [a for a, *_ in mine_rows] or sorted(used)
    orders, ordering = fair_share_orders(*sprio)
    # Without the multifactor plugin sshare prints zeros that mean nothing.
    rows = {a: (s, u, f) for a, _, s, u, f in mine_rows} if orders is not False else {}
    accounts = []
    for a in dict.fromkeys(names):
        users, (shares, use, fair) = used.get(a, {}), rows.get(a, (None, None, None))
        accounts.append(AccountUsage(a, sum(users.values()),
                                     users.get(me, 0.0) if me else None, fair, shares, use))
    held = availability.held_gpu_hours(mine) if mine is not None else None
    return Usage(since, tuple(accounts), held, orders, ordering, unavailable)


def only(found: Usage, accounts: Sequence[str]) -> Usage:
    """`found` with the named accounts only (those a request may charge)."""
    keep = tuple(a for a in found.accounts if a.account in accounts)
    return dataclasses.replace(found, accounts=keep)
