"""Why a job waits: SLURM's reason code in plain words, and what would start it sooner.

The codes are squeue's "JOB REASON CODES" (man squeue); a code not listed here is shown as
SLURM wrote it, marked as not known to hpctrain.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from hpctrain.diagnosis.model import Diagnosis
from hpctrain.slurm.reservations import Reservation, minute, segments_before
from hpctrain.values.units import format_time

_SHORTER = ("a shorter `--time` lets the scheduler fit it into gaps (backfill); fewer nodes or "
            "`--first-of 2x4,1x4` starts on whichever shape is free first")

# code -> (what it means, what would start it sooner)
REASONS: dict[str, tuple[str, str]] = {
    "Priority": ("jobs of higher priority are ahead of it in the queue", _SHORTER),
    "Resources": ("it is next, waiting for enough nodes to become free", _SHORTER),
    "Dependency": ("it waits for the job(s) it depends on to end",
                   "nothing: it starts when they end as asked"),
    "DependencyNeverSatisfied": (
        "a job it depends on ended in a way the dependency does not accept (with "
        "`--after`: it failed or was cancelled), so it can never start",
        "cancel it (`hpctrain cancel JOB`) and submit again once the earlier job has worked"),
    "BeginTime": ("its start time has not come yet (a requeued job waits out the site's "
                  "requeue delay, 120 s by default)", "nothing: it becomes eligible then"),
    "JobHeldUser": ("it is held (by you or a `--hold`)", "`scontrol release JOB`"),
    "JobHeldAdmin": ("an administrator holds it", "ask the cluster's support"),
    "ReqNodeNotAvail": ("nodes it needs are down, drained or reserved (often before a "
                        "maintenance)", "a shorter `--time` that ends before the "
                        "reservation, or another partition"),
    "NodeDown": ("a node it needs is down", "wait, or submit to another partition"),
    "PartitionTimeLimit": ("its time limit is longer than the partition allows",
                           "a `--time` within the partition's limit (`hpctrain profiles "
                           "show` lists it), or `--chain N` to go on in segments"),
    "PartitionNodeLimit": ("it asks for more nodes than the partition allows per job",
                           "fewer `--nodes`, or a partition that allows more"),
    "PartitionDown": ("the partition is down", "another partition, or wait"),
    "PartitionInactive": ("the partition is inactive", "another partition, or wait"),
    "BadConstraints": ("no node has the features asked for (a node type that does not exist "
                       "there)", "check `--constraint` / the node type against `hpctrain "
                       "profiles check`; cancel and submit again"),
    "InvalidQOS": ("the QOS is not one you may use", "another `--qos` (`hpctrain profiles "
                   "check` lists yours)"),
    "InvalidAccount": ("the account is not one you may use", "another `--account`"),
    "Reservation": ("it waits for its reservation to start", "nothing: it starts then"),
    "Licenses": ("it waits for licenses", "nothing, or fewer licenses"),
}


# code -> a few words for `status`'s INFO column.
SHORT = {
    "Priority": "behind jobs of higher priority", "Resources": "next, waiting for nodes",
    "Dependency": "waits for its dependency", "DependencyNeverSatisfied": "can never start",
    "BeginTime": "its start time has not come", "JobHeldUser": "held",
    "JobHeldAdmin": "held by an admin", "ReqNodeNotAvail": "nodes down or reserved",
    "NodeDown": "a node is down", "PartitionTimeLimit": "--time over the partition's limit",
    "PartitionNodeLimit": "more nodes than the partition allows",
    "PartitionDown": "the partition is down", "PartitionInactive": "the partition is inactive",
    "BadConstraints": "no node has those features", "InvalidQOS": "QOS not allowed",
    "InvalidAccount": "account not allowed", "Reservation": "waits for its reservation",
    "Licenses": "waits for licenses",
}


def short_reason(code: str) -> str:
    """A few words of a reason code ('' for a code hpctrain does not know)."""
    if code.startswith(("QOS", "Assoc")) and code not in SHORT:
        return "a QOS limit reached" if code.startswith("QOS") else "an account limit reached"
    return SHORT.get(code, "")


def plain_reason(code: str | None) -> tuple[str, str, bool]:
    """(what it means, what would start it sooner, whether hpctrain knows the code). squeue
    may add words after a comma (`ReqNodeNotAvail, Reserved for maintenance`)."""
    if not code:
        return "SLURM gives no reason", "ask again in a minute", False
    code, _, detail = code.partition(",")
    if detail.strip() and code in REASONS:
        meaning, sooner = REASONS[code]
        return f"{meaning}: {detail.strip()}", sooner, True
    if code in REASONS:
        return (*REASONS[code], True)
    if code.startswith(("QOS", "Assoc")):
        limit = code.removeprefix("QOS").removeprefix("Assoc")
        return (f"a limit of your {'QOS' if code.startswith('QOS') else 'account'} is reached "
                f"({limit}): jobs already running use what it allows",
                "wait for your other jobs to end, ask for less (GPUs, CPUs, nodes, time), or "
                "use another QOS or account", True)
    return f"SLURM's reason is {code}", "see `man squeue`, JOB REASON CODES", False


def pending_diagnosis(code: str | None, start: str | None,
                      waits_for: Reservation | None = None, now: float | None = None,
                      time_limit_s: int | None = None) -> Diagnosis:
    """The diagnosis of a waiting job; `waits_for`: the maintenance window in its way."""
    if waits_for is not None and now is not None:
        return _maintenance_wait(code, waits_for, now, time_limit_s)
    meaning, sooner, known = plain_reason(code)
    when = f"; SLURM expects it to start at {start}" if start else \
        "; SLURM gives no start estimate yet"
    never = code == "DependencyNeverSatisfied"
    return Diagnosis(
        "dependency_never_met" if never else "pending",
        f"the job waits: {meaning}{'' if never else when}", sooner,
        evidence=(f"squeue: Reason {code or 'None'}"
                  + (f", StartTime {start}" if start else ""),), certain=known)


def waits_for_nodes(code: str | None) -> bool:
    """SLURM keeps the job waiting for nodes it cannot have (down, drained or reserved)."""
    return bool(code) and str(code).startswith("ReqNodeNotAvail")


def maintenance_in_way(code: str | None, windows: Sequence[Reservation], now: float,
                       time_limit_s: int | None) -> Reservation | None:
    """The first maintenance window that overlaps the job's time limit from now, for a job
    SLURM keeps waiting for nodes (reason ReqNodeNotAvail)."""
    if not waits_for_nodes(code):
        return None
    # Without the time limit: the next window, as SLURM's reason names one.
    end = now + time_limit_s if time_limit_s else math.inf
    return next((w for w in sorted(windows, key=lambda r: r.start)
                 if w.maintenance and w.overlaps(now, end)), None)


def _maintenance_wait(code: str | None, w: Reservation, now: float,
                      time_limit_s: int | None) -> Diagnosis:
    split = segments_before(w, now, time_limit_s) if time_limit_s else None
    shorter = ""
    if split is not None:
        fit, chain = split
        shorter = (f"cancel it and submit again with --time {format_time(fit)} --chain "
                   f"{chain} (the packaged trainer goes on from its checkpoint in each "
                   "segment), or ")
    return Diagnosis(
        "pending", f"the job waits for maintenance reservation {w.name!r} "
        f"({minute(w.start)} to {minute(w.end)}): its time limit "
        f"{format_time(time_limit_s or 0)} would run into the window, so SLURM starts it only "
        f"after {minute(w.end)}", f"{shorter}let it wait until {minute(w.end)}",
        evidence=(f"squeue: Reason {code}", f"scontrol show reservation: {w.name}, "
                  f"Flags {','.join(sorted(w.flags))}, Nodes {','.join(w.nodes)}"))
