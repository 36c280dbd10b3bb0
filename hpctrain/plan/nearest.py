"""The nearest request the profile accepts, found by trying them (plan/suggest.py's search).

One change of a shaping option at a time, the nearest accepted one winning; a request too far
off for a few steps is rebuilt from the profile's defaults, taking back each option as asked
or as near as is accepted. Each candidate goes through the whole plan.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hpctrain.errors import PlanError
from hpctrain.plan.candidates import (
    NODE_STEPS,
    Changes,
    Value,
    asked_value,
    distance,
    feature_of,
    option_values,
    step_size,
)
from hpctrain.plan.launch_front import with_counts
from hpctrain.plan.model import JobPlan, JobRequest
from hpctrain.values.units import format_time

# The request fields a fix may change, and the option that sets each.
OPTIONS = {
    "partition": "--partition", "nodes": "--nodes", "gpus_per_node": "--gpus-per-node",
    "cpus_per_task": "--cpus-per-task", "mem": "--mem", "time": "--time", "qos": "--qos",
    "constraint": "--constraint",
}
# A step costs one plan per value of every option (about 50); an option changed early may be
# changed again. Past three steps the request is rebuilt from the profile's defaults instead.
GREEDY_STEPS = 3
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
    values = {name: option_values(req, name) for name in OPTIONS}
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
        wanted = sorted(values[name], key=lambda v: step_size(name, asked_value(req, name), v))
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
            if nodes != req.nodes and nodes <= NODE_STEPS[-1] * 64:
                moves.append(_plus(_plus(kept, "nodes", nodes), "gpus_per_node", each))
    return moves


def _as_feature(req: JobRequest, kept: Changes) -> list[Changes]:
    """A partition asked that is a node feature, moved to --constraint as one move."""
    feature = feature_of(req)
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
        plan = build(with_changes(req, changes))
    except PlanError as e:
        stuck = not e.shape and set(e.problems) <= set(others)
        left = 0 if stuck and others else max(len(e.shape), 1)
        # Problems by their kind: "3 x 200 CPUs" and "1 x 200 CPUs" are the same problem.
        kinds = frozenset(re.sub(r"\d+", "#", p) for p in e.shape)
        return _Tried(changes, left, distance(req, changes), None, kinds)
    # An option left out is a step to what the plan chose for it (leaving out --time: the
    # partition's default time, near or far from the time asked).
    return _Tried(changes, 0, distance(req, _resolved(changes, plan)), plan)


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
        return Fix(concrete, build(with_changes(req, concrete)))
    except PlanError:
        return Fix(changes, plan)


def with_changes(req: JobRequest, changes: Changes) -> JobRequest:
    """`req` with the changes; a pasted launcher's counts follow a changed shape, since its
    processes are the job's ranks (`torchrun --nproc_per_node 4` on 2-GPU nodes: 2)."""
    fields: dict[str, Any] = dict(changes)
    new = dataclasses.replace(req, **fields)
    shaped = "nodes" in fields or "gpus_per_node" in fields
    if shaped and "command" not in fields and new.gpus_per_node is not None and new.command:
        new = dataclasses.replace(
            new, command=with_counts(new.command, new.nodes, new.gpus_per_node))
    return new
