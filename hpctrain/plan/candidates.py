"""What a fix may change each shaping option to on a profile, and how far a change moves the
request (plan/nearest.py searches with them): counts, times and sizes by ratio, the GPUs in all
weighing most."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from hpctrain.plan.model import JobRequest
from hpctrain.profiles.model import Partition, Profile
from hpctrain.values.units import format_time, parse_mem_mb, parse_time_seconds

NODE_STEPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)

# A command is a value too: a pasted launcher's process counts follow the job's shape.
Value = str | int | tuple[str, ...] | None
Changes = tuple[tuple[str, Value], ...]


def option_values(req: JobRequest, name: str) -> list[Value]:
    """The values other than the request's own that option `name` can take on this profile."""
    profile, current = req.profile, getattr(req, name)
    found = [v for v in dict.fromkeys(_VALUES[name](req, profile)) if v != current]
    if name not in _NEAREST_ONLY or current is None:
        return found
    # Counts and sizes: the few nearest the request are enough, and each costs a plan.
    near = sorted((v for v in found if v is not None),
                  key=lambda v: step_size(name, asked_value(req, name), v))
    return [*([None] if None in found else []), *near[:_NEAREST]]


def _node_values(req: JobRequest, profile: Profile) -> Sequence[Value]:
    most = max(partition_nodes(p) for p in profile.partitions)
    near = (req.nodes - 1, req.nodes + 1, req.nodes // 2, req.nodes * 2, most)
    return [n for n in (*NODE_STEPS, *near) if 1 <= n <= most]


def partition_nodes(part: Partition) -> int:
    """The most nodes a job can have there: the partition's limit, else its nodes if known."""
    if part.max_nodes is not None:
        return part.max_nodes
    counts = [t.nodes for t in part.types()]
    return sum(c for c in counts if c is not None) if all(counts) else NODE_STEPS[-1]


def _gpu_values(req: JobRequest, profile: Profile) -> Sequence[Value]:
    most = max(p.most_gpus for p in profile.partitions)
    return [None, *range(most + 1)] if req.gpus_per_node is not None else list(range(most + 1))


def _time_values(req: JobRequest, profile: Profile) -> Sequence[Value]:
    limits = [p.max_time for p in profile.partitions]
    limits += [q.max_time for q in profile.qos if q.max_time]
    # The usual time too: the nearest to a time that cannot be read.
    usual = [p.default_time for p in profile.partitions if p.default_time]
    return [None, *(format_time(parse_time_seconds(t)) for t in (*limits, *usual))]


def _per_node(profile: Profile, what: str) -> list[int]:
    """A node type's CPUs or memory, whole and split among 2, 4 or 8 tasks: the most a job can
    ask for where one of its nodes is of that type."""
    found = {getattr(t, what) // k for p in profile.partitions for t in p.types()
             for k in (1, 2, 4, 8)}
    return sorted(v for v in found if v > 0)


_NEAREST_ONLY = ("nodes", "cpus_per_task", "mem", "time")
_NEAREST = 6

_VALUES: dict[str, Callable[[JobRequest, Profile], Sequence[Value]]] = {
    "partition": lambda req, pr: [None, *(p.name for p in pr.partitions)],
    "nodes": _node_values,
    "gpus_per_node": _gpu_values,
    "cpus_per_task": lambda req, pr: [None, *_per_node(pr, "cpus")],
    "mem": lambda req, pr: [None, *(f"{m}M" for m in _per_node(pr, "mem_mb"))],
    "time": _time_values,
    "qos": lambda req, pr: [None, *(q.name for q in pr.qos)],
    "constraint": lambda req, pr: [None, *filter(None, [feature_of(req)])],
}


def distance(req: JobRequest, changes: Changes) -> float:
    """How far the changes take the request: the GPUs in all weigh most, then each value."""
    changed = dict(changes)
    nodes, gpus = changed.get("nodes", req.nodes), changed.get("gpus_per_node", req.gpus_per_node)
    before = req.nodes * (req.gpus_per_node or 0)
    after = (nodes if isinstance(nodes, int) else 1) * (gpus if isinstance(gpus, int) else 0)
    # Fewer GPUs than asked is a worse fix than a few more.
    total = 4 * _ratio(after, before) + (1 if after < before else 0)
    # A partition that is a feature of the profile's nodes, given as --constraint instead
    # (Raven's `-p gpu-bw`), is the request as meant: less than a step, not two.
    if req.partition is not None and changed.get("constraint") == req.partition:
        total -= 1.5
    return total + sum(step_size(n, asked_value(req, n), v) for n, v in changes)


def asked_value(req: JobRequest, name: str) -> Value:
    """What the request asks of option `name`, as a fix's distance measures it: a time that
    cannot be read (`--time -5`) asks for the partition's usual time, not its longest."""
    value: Value = getattr(req, name)
    if name != "time" or value is None or _seconds(value):
        return value
    return _default_time(req)


def _default_time(req: JobRequest) -> str:
    """The time a job of the request's partition (else the default one) gets without --time."""
    part = req.profile.partition(req.partition or "") or req.profile.default_partition
    return format_time(parse_time_seconds(part.default_time or part.max_time))


def feature_of(req: JobRequest) -> str | None:
    """The partition asked, where it is no partition but a feature of the profile's nodes."""
    asked = req.partition
    if asked is None or req.profile.partition(asked) is not None:
        return None
    return asked if any(asked in p.features() for p in req.profile.partitions) else None


def _ratio(a: float, b: float) -> float:
    """How many times apart two counts are, on a log scale; out-of-range counts are clamped
    (a request of 10**5000 nodes is refused, and still gets a fix)."""
    return abs(math.log(_clamp(a) / _clamp(b)))


def _clamp(n: float) -> float:
    return min(max(float(n) if abs(n) < 1e300 else 1e300, 0.0), 1e300) + 0.5


def step_size(name: str, before: Value, after: Value) -> float:
    """How far one option moves: by ratio for counts, times and sizes, else one step."""
    if isinstance(before, int) and isinstance(after, int):
        return _ratio(after, before)
    if name == "time" and _seconds(before) and _seconds(after):
        return _ratio(_seconds(after), _seconds(before))
    if name == "mem" and _megabytes(before) and _megabytes(after):
        return _ratio(_megabytes(after), _megabytes(before))
    return 1.0


def _megabytes(value: Value) -> int:
    try:
        return parse_mem_mb(str(value)) if value is not None else 0
    except ValueError:
        return 0


def _seconds(value: Value) -> int:
    if value is None:
        return 0
    try:
        return parse_time_seconds(str(value))
    except ValueError:
        return 0

