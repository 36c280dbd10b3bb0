"""Rules for the QOS and the wall time: what the partition requires and how long it allows."""

from __future__ import annotations

from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.text import IDENT, unsafe_name
from hpctrain.profiles.model import Partition
from hpctrain.units import format_time, parse_time_seconds


def choose_qos(req: JobRequest, part: Partition) -> Outcome[str | None]:
    """The QOS: the partition's required one fills in; a different or unknown one is refused."""
    profile, qos = req.profile, req.qos
    if qos is None:
        if not part.required_qos:
            return Outcome(None)
        note = f"--qos {part.required_qos} added: partition {part.name} requires it"
        return Outcome(part.required_qos, notes=(note,))
    problems = unsafe_name(qos, IDENT, "--qos")
    if problems:
        return Outcome(qos, problems)
    if profile.qos and profile.qos_named(qos) is None:
        known = ", ".join(q.name for q in profile.qos)
        problems = (f"{profile.name}: unknown QOS {qos!r}; choose one of: {known}",)
    misfits: tuple[str, ...] = ()
    if part.required_qos and qos != part.required_qos:
        misfits = (
            f"{profile.name}: partition {part.name} requires --qos {part.required_qos} "
            f"(not {qos})",
        )
    return Outcome(qos, problems, misfits)


def wall_time(req: JobRequest, part: Partition, qos: str | None) -> Outcome[int]:
    """Seconds of wall time: the partition's default unless given, within every limit."""
    limit, limit_by = _time_limit(req, part, qos)
    if req.time is None:
        return Outcome(min(parse_time_seconds(part.default_time or part.max_time), limit))
    try:
        time_s = parse_time_seconds(req.time)
    except ValueError as e:
        return Outcome(limit, problems=(f"--time: {e}",))
    if time_s <= 0:
        return Outcome(time_s, problems=("--time must be more than zero",))
    if time_s > limit:
        return Outcome(time_s, misfits=(
            f"{req.profile.name}: --time {format_time(time_s)} is over the limit of {limit_by} "
            f"({format_time(limit)}); use --time {format_time(limit)}"
            + (" or another partition" if limit_by.startswith("partition") else ""),
        ))
    return Outcome(time_s)


def _time_limit(req: JobRequest, part: Partition, qos: str | None) -> tuple[int, str]:
    """The tighter of the partition's and the QOS's time limits, and which one it is."""
    limit, limit_by = part.max_seconds, f"partition {part.name}"
    qos_obj = req.profile.qos_named(qos) if qos else None
    if qos_obj is not None and qos_obj.max_time is not None:
        qos_limit = parse_time_seconds(qos_obj.max_time)
        if qos_limit < limit:
            limit, limit_by = qos_limit, f"QOS {qos_obj.name}"
    return limit, limit_by
