"""Rules for the QOS and the wall time: what the partition requires and how long it allows."""

from __future__ import annotations

from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.sbatch import Asked, asked
from hpctrain.plan.text import IDENT, unsafe_name
from hpctrain.profiles.model import Partition
from hpctrain.values.units import format_time, parse_time_seconds


def _asked_qos(req: JobRequest, part: Partition) -> Asked:
    """--qos, else SBATCH_QOS, else the profile's default_qos (which gives way to a
    partition's required QOS)."""
    found = asked(req.qos, "--qos", req.shell, "SBATCH_QOS")
    if found.value is None and req.profile.default_qos is not None and not part.required_qos:
        return Asked(req.profile.default_qos, "the profile's default_qos", ())
    return found


def choose_qos(req: JobRequest, part: Partition) -> Outcome[str | None]:
    """The QOS: --qos, else SBATCH_QOS, else the partition's required one, else the profile's
    default_qos; one the profile does not list or the partition does not take is refused."""
    profile = req.profile
    found = _asked_qos(req, part)
    qos, asked_by, notes = found.value, found.by, found.notes
    if qos is None:
        if not part.required_qos:
            return Outcome(None)
        note = f"--qos {part.required_qos} added: partition {part.name} requires it"
        return Outcome(part.required_qos, notes=(note,))
    problems = unsafe_name(qos, IDENT, asked_by)
    if problems:
        return Outcome(qos, problems, notes=notes)
    source = "" if asked_by == "--qos" else f" (from {asked_by})"
    if profile.qos and profile.qos_named(qos) is None:
        known = ", ".join(q.name for q in profile.qos)
        problems = (f"{profile.name}: unknown QOS {qos!r}{source}; choose one of: {known}",)
    misfits: tuple[str, ...] = ()
    if part.required_qos and qos != part.required_qos:
        misfits = (
            f"{profile.name}: partition {part.name} requires --qos {part.required_qos} "
            f"(not {qos}{source})",
        )
    return Outcome(qos, problems, misfits, notes)


def wall_time(req: JobRequest, part: Partition, qos: str | None) -> Outcome[int]:
    """Seconds of wall time: --time, else SBATCH_TIMELIMIT, else the partition's default;
    within every limit."""
    limit, limit_by = _time_limit(req, part, qos)
    found = asked(req.time, "--time", req.shell, "SBATCH_TIMELIMIT")
    time, asked_by, notes = found.value, found.by, found.notes
    if time is None:
        return Outcome(min(parse_time_seconds(part.default_time or part.max_time), limit))
    try:
        time_s = parse_time_seconds(time)
    except ValueError as e:
        return Outcome(limit, problems=(f"{asked_by}: {e}",), notes=notes)
    if time_s <= 0:
        return Outcome(time_s, problems=(f"{asked_by} must be more than zero",), notes=notes)
    if time_s > limit:
        # The limit only: the fix (a time, a QOS or a partition the profile accepts) is
        # searched for over the whole plan (plan/suggest.py).
        return Outcome(time_s, misfits=(
            f"{req.profile.name}: {asked_by} {format_time(time_s)} is over the limit of "
            f"{limit_by} ({format_time(limit)})",
        ), notes=notes)
    return Outcome(time_s, notes=notes)


def _time_limit(req: JobRequest, part: Partition, qos: str | None) -> tuple[int, str]:
    """The tighter of the partition's and the QOS's time limits, and which one it is."""
    limit, limit_by = part.max_seconds, f"partition {part.name}"
    qos_obj = req.profile.qos_named(qos) if qos else None
    if qos_obj is not None and qos_obj.max_time is not None:
        qos_limit = parse_time_seconds(qos_obj.max_time)
        if qos_limit < limit:
            limit, limit_by = qos_limit, f"QOS {qos_obj.name}"
    return limit, limit_by
