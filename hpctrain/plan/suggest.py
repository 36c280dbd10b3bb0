"""A refused request's fix: the nearest request the profile accepts, found by trying them.

Fixes are not written beside the checks: a hand-made "use --gpus-per-node 4" can itself be
refused by another rule (issue 39). Here the options that shape the job (partition, nodes, GPUs,
CPUs, memory, time, QOS, constraint) are varied over what the profile offers, one change at a
time and the nearest values first; each candidate goes through the whole plan, and only one it
accepts is offered. A request too far off for a few steps is rebuilt from the profile's
defaults, taking back each option as asked or as near as is accepted. A pasted launcher's
process counts change with the shape (they are the job's ranks), and its ranks are read as
written and, over several nodes, as its count in all (issue 52).
"""

from __future__ import annotations

import dataclasses
import math
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hpctrain.errors import PlanError
from hpctrain.plan.launch_lines import line_counts, with_counts
from hpctrain.plan.model import JobPlan, JobRequest
from hpctrain.profiles.model import Partition, Profile
from hpctrain.values.units import format_time, parse_mem_mb, parse_time_seconds

# The request fields a fix may change, and the option that sets each.
OPTIONS = {
    "partition": "--partition", "nodes": "--nodes", "gpus_per_node": "--gpus-per-node",
    "cpus_per_task": "--cpus-per-task", "mem": "--mem", "time": "--time", "qos": "--qos",
    "constraint": "--constraint",
}
# A step costs one plan per value of every option (about 50); an option changed early may be
# changed again. Past three steps the request is rebuilt from the profile's defaults instead.
GREEDY_STEPS = 3
_NODE_STEPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)

# A command is a value too: a pasted launcher's process counts follow the job's shape.
Value = str | int | tuple[str, ...] | None
Changes = tuple[tuple[str, Value], ...]
Build = Callable[[JobRequest], JobPlan]


@dataclass(frozen=True)
class Fix:
    """Options to change (a value of None: leave the option out) and the plan they give."""

    changes: Changes
    plan: JobPlan | None

    def options(self) -> list[str]:
        """The changes as command-line words, e.g. ['--nodes', '2', '--gpus-per-node', '4'];
        a changed command last, after `--`."""
        words: list[str] = []
        for name, value in self.changes:
            if value is not None and not isinstance(value, tuple):
                words += [OPTIONS[name], str(value)]
        return words + [w for _, v in self.changes if isinstance(v, tuple) for w in ("--", *v)]

    def text(self) -> str:
        """'--nodes 2 --gpus-per-node 4 (2 node(s) x 4 GPU(s), 1:00:00) is accepted'."""
        dropped = [OPTIONS[n] for n, v in self.changes if v is None]
        words = self.options()
        cut = words.index("--") if "--" in words else len(words)
        parts = [shlex.join(words[:cut])] if cut else []
        parts += [f"without {d}" for d in dropped]
        if words[cut:]:
            # The command goes last, as on the command line.
            parts = [" ".join([", ".join(parts), shlex.join(words[cut:])]).strip()]
        p = self.plan
        if p is None:
            return f"{', '.join(parts)} fits the profile (the other problems above remain)"
        shape = (f"{p.nodes} node(s) x {p.gpus_per_node} GPU(s), {p.cpus_per_task} CPUs a task, "
                 f"{format_time(p.time_seconds)}, partition {p.partition}")
        return f"{', '.join(parts)} is accepted ({shape})"


def nearest_accepted(req: JobRequest, build: Build, others: Sequence[str] = ()) -> Fix | None:
    """The nearest accepted request, one changed option at a time: every single change is
    tried, the nearest accepted one wins; else the change that leaves the fewest problems
    about the job's shape is kept and the next option is searched from there.

    `others`: the request's problems that no shaping option can fix; a candidate left with
    some of those only fixes the shape (plan None).
    """
    # What only the submit needs (the account) is the request's own problem, not the search's.
    req = dataclasses.replace(req, preview=True)
    values = {name: _values(req, name) for name in OPTIONS}
    kept: Changes = ()
    left, problems = _try(req, (), build, others).score()
    for _ in range(GREEDY_STEPS):
        now = dict(kept)
        moves = [_plus(kept, name, v)
                 for name in OPTIONS for v in values[name] if name not in now or now[name] != v]
        tried = [_try(req, m, build, others)
                 for m in (*moves, *_layouts(req, kept, values), *_as_feature(req, kept))]
        done = [t for t in tried if t.left == 0]
        if done:
            # At a tie, a value given beats an option left out: it says what the job gets.
            best = min(done, key=lambda t: (t.distance, any(v is None for _, v in t.changes)))
            if best.plan is None:
                return Fix(best.changes, None)
            return _concrete(req, best.changes, best.plan, build)
        # As many problems left can still be closer: a rule that stopped at the first one
        # (CPUs too many) may have hidden the next (memory too much). A change that leaves
        # the same problems standing is no step at all.
        step = min(tried, key=lambda t: (t.left, len(t.problems & problems), t.distance),
                   default=None)
        if step is None or step.left > left or step.problems == problems:
            break
        kept, (left, problems) = step.changes, step.score()
    return _rebuilt(req, values, build, others)


# The order in which a rebuilt request takes back the user's options: where and how big first.
_REBUILD = ("partition", "nodes", "gpus_per_node", "qos", "time", "constraint",
            "cpus_per_task", "mem")


def _rebuilt(req: JobRequest, values: dict[str, list[Value]], build: Build,
             others: Sequence[str]) -> Fix | None:
    """Where one change at a time gets stuck: every shaping option left out (the profile's
    defaults, which it accepts), then each option given back, as asked or as near as is
    accepted with those before it."""
    kept: Changes = tuple((n, _DEFAULTS[n]) for n in _REBUILD if getattr(req, n) != _DEFAULTS[n])
    if _try(req, kept, build, others).left:
        # A pasted launcher's count takes the GPUs per node left out: one GPU, its count one.
        kept = _plus(kept, "gpus_per_node", 1)
        if _try(req, kept, build, others).left:
            return None
    for name in _REBUILD:
        if getattr(req, name) == _DEFAULTS[name]:
            continue
        wanted = sorted(values[name], key=lambda v: _step(name, _asked(req, name), v))
        for value in (getattr(req, name), *wanted):
            trial = _plus(kept, name, value)
            if not _try(req, trial, build, others).left:
                kept = trial
                break
    changes = tuple((n, v) for n, v in kept if v != getattr(req, n))
    found = _try(req, changes, build, others)
    if found.plan is None:
        return Fix(changes, None)
    return _concrete(req, changes, found.plan, build)


# What a request that leaves an option out has there.
_DEFAULTS: dict[str, Value] = {**dict.fromkeys(OPTIONS), "nodes": 1}


def _layouts(req: JobRequest, kept: Changes, values: dict[str, list[Value]]) -> list[Changes]:
    """Nodes and GPUs per node changed together, as one move that keeps the GPUs asked for in
    all: 8 GPUs on 4-GPU nodes are 2 x 4, not 1 x 4."""
    total = req.nodes * (req.gpus_per_node or 0)
    moves: list[Changes] = []
    for each in values["gpus_per_node"]:
        if isinstance(each, int) and each > 0 and total > 0:
            nodes = -(-total // each)
            if nodes != req.nodes and nodes <= _NODE_STEPS[-1] * 64:
                moves.append(_plus(_plus(kept, "nodes", nodes), "gpus_per_node", each))
    return moves


def _as_feature(req: JobRequest, kept: Changes) -> list[Changes]:
    """A partition asked that is a node feature, moved to --constraint as one move."""
    feature = _feature_of(req)
    if feature is None:
        return []
    return [_plus(_plus(kept, "partition", None), "constraint", feature)]


@dataclass(frozen=True)
class _Tried:
    """A change to a refused request, planned: what is still wrong, how far it goes."""

    changes: Changes
    left: int  # problems about the shape still there (0: accepted, or only `others` remain)
    distance: float
    plan: JobPlan | None
    problems: frozenset[str] = frozenset()

    def score(self) -> tuple[int, frozenset[str]]:
        return self.left, self.problems


def _try(req: JobRequest, changes: Changes, build: Build, others: Sequence[str]) -> _Tried:
    try:
        plan = build(_changed(req, changes))
    except PlanError as e:
        stuck = not e.shape and set(e.problems) <= set(others)
        left = 0 if stuck and others else max(len(e.shape), 1)
        # Problems by their kind: "3 x 200 CPUs" and "1 x 200 CPUs" are the same problem.
        kinds = frozenset(re.sub(r"\d+", "#", p) for p in e.shape)
        return _Tried(changes, left, _distance(req, changes), None, kinds)
    # An option left out is a step to what the plan chose for it (leaving out --time: the
    # partition's default time, near or far from the time asked).
    return _Tried(changes, 0, _distance(req, _resolved(changes, plan)), plan)


def _resolved(changes: Changes, plan: JobPlan) -> Changes:
    """`changes` with each option left out given the value the plan chose for it."""
    chosen: dict[str, Value] = {"cpus_per_task": plan.cpus_per_task, "mem": f"{plan.mem_mb}M",
                                "gpus_per_node": plan.gpus_per_node,
                                "time": format_time(plan.time_seconds)}
    return tuple((n, chosen[n] if v is None and n in chosen else v) for n, v in changes)


def _plus(kept: Changes, name: str, value: Value) -> Changes:
    """`kept` and one more change; a second change of an option replaces its first."""
    return (*((n, v) for n, v in kept if n != name), (name, value))


def _concrete(req: JobRequest, changes: Changes, plan: JobPlan,
              build: Build) -> Fix:
    """A dropped option the user gave is shown with the value the plan chose, if that value,
    given, is accepted too (a fix that says "--cpus-per-task 18" reads better than "without")."""
    concrete = _resolved(changes, plan)
    if concrete == changes:
        return Fix(changes, plan)
    try:
        return Fix(concrete, build(_changed(req, concrete)))
    except PlanError:
        return Fix(changes, plan)


def _changed(req: JobRequest, changes: Changes) -> JobRequest:
    """`req` with the changes; a pasted launcher's counts follow a changed shape, since its
    processes are the job's ranks (`torchrun --nproc_per_node 4` on 2-GPU nodes: 2)."""
    fields: dict[str, Any] = dict(changes)
    new = dataclasses.replace(req, **fields)
    shaped = "nodes" in fields or "gpus_per_node" in fields
    if shaped and "command" not in fields and new.gpus_per_node is not None and new.command:
        new = dataclasses.replace(
            new, command=with_counts(new.command, new.nodes, new.gpus_per_node))
    return new


def _values(req: JobRequest, name: str) -> list[Value]:
    """The values other than the request's own that option `name` can take on this profile."""
    profile, current = req.profile, getattr(req, name)
    found = [v for v in dict.fromkeys(_VALUES[name](req, profile)) if v != current]
    if name not in _NEAREST_ONLY or current is None:
        return found
    # Counts and sizes: the few nearest the request are enough, and each costs a plan.
    near = sorted((v for v in found if v is not None),
                  key=lambda v: _step(name, _asked(req, name), v))
    return [*([None] if None in found else []), *near[:_NEAREST]]


def _node_values(req: JobRequest, profile: Profile) -> Sequence[Value]:
    most = max(_most_nodes(p) for p in profile.partitions)
    near = (req.nodes - 1, req.nodes + 1, req.nodes // 2, req.nodes * 2, most)
    return [n for n in (*_NODE_STEPS, *near) if 1 <= n <= most]


def _most_nodes(part: Partition) -> int:
    """The most nodes a job can have there: the partition's limit, else its nodes if known."""
    if part.max_nodes is not None:
        return part.max_nodes
    counts = [t.nodes for t in part.types()]
    return sum(c for c in counts if c is not None) if all(counts) else _NODE_STEPS[-1]


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
    "constraint": lambda req, pr: [None, *filter(None, [_feature_of(req)])],
}


def _distance(req: JobRequest, changes: Changes) -> float:
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
    return total + sum(_step(n, _asked(req, n), v) for n, v in changes)


def _asked(req: JobRequest, name: str) -> Value:
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


def _feature_of(req: JobRequest) -> str | None:
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


def _step(name: str, before: Value, after: Value) -> float:
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


def with_fix(err: PlanError, req: JobRequest, build: Build) -> PlanError:
    """`err` with its fix: the nearest accepted request, or word that nothing near is."""
    if not err.shape:
        return err  # each problem names its own fix; no shaping option changes them
    others = [p for p in err.problems if p not in err.shape]
    if _readings(req):
        err.fix = _line_fix(req, build, others)
        return err
    fix = nearest_accepted(req, build, others)
    if fix is not None:
        err.fix = _as_typed(req, req, fix).text()
    elif not others:
        err.fix = (f"no request near this one is accepted by profile {req.profile.name}; "
                   f"see hpctrain profiles show {req.profile.name}")
    return err


@dataclass(frozen=True)
class _Reading:
    """What a pasted launcher's counts may mean: the request laid out for that many ranks."""

    request: JobRequest
    ranks: int
    label: str


def _readings(req: JobRequest) -> list[_Reading]:
    """The ranks a pasted launcher asks for: its count on each of the job's nodes; and, over
    several nodes, its count as the ranks in all (a one-node tutorial line in a bigger job)."""
    line_nodes, per_node, total = line_counts(req.command, req.nodes)
    if per_node is None and total is not None:
        # `srun -n 5` over 2 nodes: no equal split; read as on one node, for the search.
        return [_Reading(_laid_out(req, 1, total), total, f"the line's {total} ranks")]
    if per_node is None:
        return []
    nodes = line_nodes or req.nodes
    written = _Reading(_laid_out(req, nodes, per_node), nodes * per_node,
                       f"the line's {nodes * per_node} ranks"
                       + (f" ({per_node} on each of {nodes} nodes)" if nodes > 1 else ""))
    if nodes == 1:
        return [written]
    split = next(n for n in (nodes, 1) if per_node % n == 0)
    return [written, _Reading(_laid_out(req, split, per_node // split), per_node,
                              f"{per_node} ranks in all")]


def _laid_out(req: JobRequest, nodes: int, per_node: int) -> JobRequest:
    return _changed(req, (("nodes", nodes), ("gpus_per_node", per_node)))


def _line_fix(req: JobRequest, build: Build, others: Sequence[str]) -> str | None:
    """For a pasted launcher: each reading's nearest accepted request that keeps its ranks,
    and what the readings that none keeps would need; else the nearest accepted request."""
    readings = _readings(req)
    found = [(r, _reading_fix(req, r, build, others)) for r in readings]
    kept = [(r, f) for r, f in found if f is not None and _ranks(f) in (r.ranks, None)]
    texts = [f"for {r.label}: {f.text()}" if len(readings) > 1 else f.text() for r, f in kept]
    texts += [_needs(req, r) for r, f in found if (r, f) not in kept]
    nearest = next((f for _, f in found if f is not None), None)
    if not kept and nearest is not None:
        texts.append(nearest.text())
    return "; ".join(dict.fromkeys(texts)) or None


def _ranks(fix: Fix) -> int | None:
    return None if fix.plan is None else fix.plan.nodes * max(fix.plan.gpus_per_node, 1)


def _reading_fix(req: JobRequest, reading: _Reading, build: Build,
                 others: Sequence[str]) -> Fix | None:
    """The reading's nearest accepted request, as changes to what the user typed."""
    fix = nearest_accepted(reading.request, build, others)
    return None if fix is None else _as_typed(req, reading.request, fix)


def _as_typed(req: JobRequest, base: JobRequest, fix: Fix) -> Fix:
    """A fix found from `base` as changes to `req`, the request as typed; a command whose
    pasted counts followed the shape is one of them."""
    final = _changed(base, fix.changes)
    changes: Changes = tuple((n, getattr(final, n)) for n in OPTIONS
                             if getattr(final, n) != getattr(req, n))
    if tuple(final.command) != tuple(req.command):
        changes += (("command", tuple(final.command)),)
    return Fix(changes, fix.plan)


def _needs(req: JobRequest, reading: _Reading) -> str:
    """Why no fix keeps a reading's ranks: more nodes than the profile allows, or no split."""
    most_gpus = max(max(p.most_gpus for p in req.profile.partitions), 1)
    most_nodes = max(_most_nodes(p) for p in req.profile.partitions)
    needed = -(-reading.ranks // most_gpus)
    name = req.profile.name
    if needed > most_nodes:
        return (f"{reading.label} need {needed} node(s) of {most_gpus} GPU(s), more than "
                f"profile {name} allows ({most_nodes})")
    return f"{reading.label} do not split into equal nodes that profile {name} accepts"
