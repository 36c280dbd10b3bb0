"""A refusal's fix is accepted when applied: thousands of requests over every shipped profile.

Each refused request's `Fix:` line is read back as a user would retype it (its `--option value`
words and its `without --option`), applied, and planned again: it must be accepted. A refusal
without a fix would have to say that nothing near is accepted: never, on this grid.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import re
from collections import Counter
from typing import Any

import pytest

from hpctrain.errors import HpctrainError, PlanError
from hpctrain.plan import JobRequest, build_plan
from hpctrain.plan.gpus import with_total_gpus
from hpctrain.plan.nearest import OPTIONS
from hpctrain.profiles import load_profile
from hpctrain.profiles.loader import list_profiles
from hpctrain.values.units import format_time, parse_time_seconds

FIELD_OF = {option: field for field, option in OPTIONS.items()}
_WORDS = re.compile(r"(without )?(--[a-z-]+)(?: (?!--|without|is )([^\s,]+))?")
COMMAND = ("python", "train.py")


def _profiles() -> list[str]:
    return sorted(p.name for p in list_profiles() if p.source == "shipped")


def _applied(req: JobRequest, fix: str) -> JobRequest:
    """`req` with the fix's options as written in its text, e.g. '--nodes 2 --gpus-per-node 4'."""
    accepted = fix.split(" is accepted")[0]
    changes: dict[str, Any] = {}
    for without, option, value in _WORDS.findall(accepted):
        field = FIELD_OF[option]
        if without:
            changes[field] = None
        else:
            changes[field] = int(value) if field in ("nodes", "gpus_per_node",
                                                     "cpus_per_task") else value
    assert changes, fix
    return dataclasses.replace(req, **changes)


def _times(profile: Any) -> list[str | None]:
    limits = [parse_time_seconds(p.max_time) for p in profile.partitions]
    limits += [parse_time_seconds(q.max_time) for q in profile.qos if q.max_time]
    near = {s + d for s in limits for d in (-60, 0, 60)} | {1800, 4 * 3600 + 60, 3 * 86400}
    return [None, *(format_time(s) for s in sorted(near) if s > 0)]


def _axes(profile: Any) -> dict[str, list[Any]]:
    """The values of each option around the profile's limits."""
    most = max(p.most_gpus for p in profile.partitions)
    return {
        "partition": [p.name for p in profile.partitions], "nodes": [2, 3, 5, 17, 100],
        "gpus_per_node": [*range(0, most + 2), 2 * most],
        "cpus_per_task": [1, 17, 19, 48, 73, 200], "mem": ["1G", "130G", "600G"],
        "time": [t for t in _times(profile) if t], "qos": [q.name for q in profile.qos],
    }


def _sample() -> list[JobRequest]:
    """1,300 requests a profile, drawn with a fixed seed: each sets one to four options, as a
    command line does, to values around the profile's limits."""
    rng = random.Random(39)
    out: list[JobRequest] = []
    for name in _profiles():
        profile = load_profile(name)
        axes = {k: v for k, v in _axes(profile).items() if v}
        seen: set[tuple[tuple[str, Any], ...]] = set()
        while len(seen) < 1300:
            given = rng.sample(sorted(axes), rng.randint(1, 4))
            seen.add(tuple(sorted((k, rng.choice(axes[k])) for k in given)))
        out += [JobRequest(profile=profile, command=COMMAND, preview=True, **dict(options))
                for options in sorted(seen, key=repr)]
    return out


def test_every_fix_is_accepted_when_applied() -> None:
    seen: Counter[str] = Counter()
    for req in _sample():
        try:
            build_plan(req)
            seen["accepted"] += 1
            continue
        except PlanError as e:
            err = e
        # Leaving every shaping option out is always accepted, so a fix always exists.
        assert err.fix and not err.fix.startswith("no request near"), err.problems
        fixed = _applied(req, err.fix)
        try:
            build_plan(fixed, suggest=False)
        except PlanError as again:
            pytest.fail(f"{req.profile.name}: fix {err.fix!r} for {err.problems} is refused: "
                        f"{again.problems}")
        seen["fixed"] += 1
    assert sum(seen.values()) >= 5000 and seen["fixed"] >= 1000, seen


@pytest.mark.parametrize("name", _profiles())
def test_every_total_gpus_fix_is_accepted(name: str) -> None:
    profile = load_profile(name)
    most = max(p.most_gpus for p in profile.partitions)
    for total, part in itertools.product(range(1, 4 * most + 4), profile.partitions):
        if not part.most_gpus:
            continue
        req = JobRequest(profile=profile, partition=part.name, command=COMMAND, preview=True)
        try:
            with_total_gpus(req, total, nodes_given=False)
            continue
        except HpctrainError as e:
            fix = e.fix or ""
        for other in re.findall(r"--gpus (\d+)", fix):
            build_plan(with_total_gpus(req, int(other), nodes_given=False), suggest=False)


def test_raven_six_gpus_names_totals_that_raven_takes() -> None:
    """The review's case: --gpus 6 on Raven suggested --nodes 2 --gpus-per-node 3 (refused)."""
    req = JobRequest(profile=load_profile("raven"), command=COMMAND)
    with pytest.raises(PlanError) as e:
        with_total_gpus(req, 6, nodes_given=False)
    assert e.value.fix == ("--gpus 8 (2 node(s) x 4 GPU(s)) or --gpus 4 (1 node(s) x 4 GPU(s)) "
                           "is accepted")


def test_a_shared_node_cpu_fix_fits_the_share() -> None:
    """--cpus-per-task 100 on Raven suggested 72, refused on a shared node (18 at most)."""
    req = JobRequest(profile=load_profile("raven"), command=COMMAND, cpus_per_task=100)
    with pytest.raises(PlanError) as e:
        build_plan(req)
    assert e.value.fix is not None and e.value.fix.startswith("--cpus-per-task 18 is accepted")
    assert not any("use --" in p for p in e.value.problems)
