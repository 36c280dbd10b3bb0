"""Fixes on the dev cluster's own profile, pasted launch lines included (issue 52).

Every `... is accepted` of a refusal's `Fix:` line is read back as a user would retype it (its
options, `without --option`, and the command after `--`), applied to the request as typed, and
planned again: it must be accepted. `local`'s limits are the dev cluster's own, so a fix
accepted here is accepted by `devcluster up`'s SLURM too (tests/jobs: the cluster's check).
"""

from __future__ import annotations

import dataclasses
import random
import re
import shlex
from typing import Any

import pytest

from hpctrain.errors import PlanError
from hpctrain.plan import JobRequest, build_plan
from hpctrain.plan.nearest import OPTIONS
from hpctrain.profiles import load_profile

FIELD_OF = {option: field for field, option in OPTIONS.items()}
_LABEL = re.compile(r"^for [^:]+: ")
_COUNTS = ("nodes", "gpus_per_node", "cpus_per_task")


def accepted_parts(fix: str) -> list[str]:
    """The fixes a Fix: line offers, each as its command-line words."""
    parts = [_LABEL.sub("", p) for p in fix.split("; ") if " is accepted" in p]
    return [p.split(" is accepted")[0] for p in parts]


def applied(req: JobRequest, part: str) -> JobRequest:
    """`req` with one offered fix: '--gpus-per-node 2 -- torchrun --nproc_per_node 2 x.py'."""
    words = shlex.split(part.replace(", without ", " without "))
    changes: dict[str, Any] = {}
    i = 0
    while i < len(words):
        if words[i] == "--":
            changes["command"] = tuple(words[i + 1:])
            break
        if words[i] == "without":
            changes[FIELD_OF[words[i + 1]]] = None
        else:
            field = FIELD_OF[words[i]]
            changes[field] = int(words[i + 1]) if field in _COUNTS else words[i + 1]
        i += 2
    assert changes, part
    return dataclasses.replace(req, **changes)


def _commands() -> list[tuple[str, ...]]:
    lines: list[tuple[str, ...]] = [("python", "train.py")]
    for k in range(1, 7):
        lines += [("torchrun", "--nproc_per_node", str(k), "train.py"),
                  ("torchrun", f"--nproc-per-node={k}", "--nnodes", "2", "train.py"),
                  ("srun", "-n", str(k), "python", "train.py"),
                  ("srun", f"--ntasks-per-node={k}", "python", "train.py")]
    return lines


def _sample(n: int) -> list[JobRequest]:
    """Requests on `local` around its limits (2 nodes of 2 GPUs, 2 hours), drawn with a seed."""
    rng = random.Random(52)
    profile = load_profile("local")
    axes: dict[str, list[Any]] = {
        "nodes": [1, 2, 3, 4, 5], "gpus_per_node": [None, 0, 1, 2, 3, 4],
        "time": [None, "-5", "99:99:99", "05:00:00", "01:00:00"],
        "command": _commands(), "partition": [None, "debug", "gpu"],
    }
    seen = {tuple((k, rng.choice(v)) for k, v in axes.items()) for _ in range(n)}
    return [JobRequest(profile=profile, preview=True, **dict(s)) for s in sorted(seen, key=repr)]


def test_every_fix_on_local_is_accepted_when_applied() -> None:
    fixed = 0
    for req in _sample(400):
        try:
            build_plan(req)
            continue
        except PlanError as e:
            err = e
        if not err.shape:
            continue  # each problem names its own fix
        assert err.fix and not err.fix.startswith("no request near"), (req, err.problems)
        parts = accepted_parts(err.fix)
        assert parts, (req.command, err.fix)
        for part in parts:
            try:
                plan = build_plan(applied(req, part), suggest=False)
            except PlanError as again:
                pytest.fail(f"fix {part!r} of {err.fix!r} for {req} is refused: "
                            f"{again.problems}")
            # The dev cluster has 2 nodes: no fix may need a third.
            assert plan.nodes <= 2
            fixed += 1
    assert fixed >= 100


def _fix(profile: str, **options: Any) -> str:
    req = JobRequest(profile=load_profile(profile), preview=True, **options)
    with pytest.raises(PlanError) as e:
        build_plan(req)
    assert e.value.fix is not None
    return e.value.fix


def test_a_pasted_line_of_four_per_node_gets_the_shapes_that_fit() -> None:
    """The review's line on 2-GPU nodes: 4 ranks in all fit; 8 would need 4 nodes."""
    fix = _fix("local", nodes=2, command=("torchrun", "--nproc_per_node", "4", "train.py"))
    assert fix.startswith("for 4 ranks in all: --gpus-per-node 2 -- torchrun "
                          "--nproc_per_node 2 train.py is accepted (2 node(s) x 2 GPU(s)"), fix
    assert ("the line's 8 ranks (4 on each of 2 nodes) need 4 node(s) of 2 GPU(s), more than "
            "profile local allows (2)") in fix


def test_a_pasted_line_where_both_readings_fit_offers_both() -> None:
    fix = _fix("raven", nodes=2, command=("torchrun", "--nproc_per_node", "8", "train.py"))
    assert ("for the line's 16 ranks (8 on each of 2 nodes): --nodes 4 --gpus-per-node 4 -- "
            "torchrun --nproc_per_node 4 train.py is accepted") in fix
    assert "for 8 ranks in all: --gpus-per-node 4 -- torchrun --nproc_per_node 4" in fix


def test_one_node_of_four_ranks_becomes_two_of_two() -> None:
    fix = _fix("local", command=("torchrun", "--nproc_per_node", "4", "train.py"))
    assert fix.startswith("--nodes 2 --gpus-per-node 2 -- torchrun --nproc_per_node 2 "
                          "train.py is accepted"), fix


def test_three_gpus_on_local_stay_on_the_dev_clusters_two_nodes() -> None:
    fix = _fix("local", gpus_per_node=3, command=("python", "x.py"))
    assert "--nodes 3" not in fix and "is accepted (2 node(s) x 2 GPU(s)" in fix, fix


@pytest.mark.parametrize(("time", "want"), [("-5", "--time 00:30:00"),
                                            ("99:99:99", "--time 00:30:00"),
                                            ("5:00:00", "--time 02:00:00")])
def test_a_time_fix_is_the_usual_time_unless_over_the_limit(time: str, want: str) -> None:
    """An unreadable time gets the partition's default (shorter jobs start sooner); a time
    over the limit gets the limit."""
    assert _fix("local", time=time, command=("python", "x.py")).startswith(f"{want} is "), time


def test_a_partition_that_is_a_node_feature_becomes_a_constraint() -> None:
    fix = _fix("raven", partition="gpu-bw", command=("python", "x.py"))
    assert fix.startswith("--constraint gpu-bw, without --partition is accepted"), fix
