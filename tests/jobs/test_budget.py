"""A budget of GPU-hours in a profile (issue 42): what the user's jobs hold, read from recorded
`squeue --me` output (22.05), and a submit over the budget refused with the numbers and a fix
that is accepted. On the dev cluster: tests/jobs/test_budget_cluster.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from hpctrain.errors import PlanError
from hpctrain.plan import JobRequest, build_plan
from hpctrain.plan.model import SweepArray
from hpctrain.profiles import load_profile
from hpctrain.slurm import availability

RECORDED = Path(__file__).resolve().parent / "recorded" / "slurm-22.05"


def test_the_gpu_hours_my_jobs_hold() -> None:
    text = (RECORDED / "squeue_mine_gpus.txt").read_text()
    # 2 nodes x 2 GPUs x 9:58 left (running) + 1 x 1 x 30:00 (waiting); the CPU job holds none.
    assert availability.held_gpu_hours(text) == pytest.approx(2 * 2 * 598 / 3600 + 0.5)
    assert availability.held_gpu_hours("1|RUNNING|1|gres:gpu:4|UNLIMITED|UNLIMITED\n") == 0
    assert availability.held_gpu_hours("") == 0


def _request(budget: float, held: float | None, **kw: object) -> JobRequest:
    profile = dataclasses.replace(load_profile("local"), budget_gpu_hours=budget)
    return JobRequest(profile=profile, command=("true",), held_gpu_hours=held,
                      **kw)  # type: ignore[arg-type]


def test_a_job_over_the_budget_is_refused_with_the_numbers_and_a_fix() -> None:
    with pytest.raises(PlanError) as refused:
        build_plan(_request(2.0, 1.0, nodes=2, gpus_per_node=2, time="01:00:00"))
    text = str(refused.value)
    assert ("over the budget of 2 GPU-hours on hpctrain-dev (budget_gpu_hours in profile "
            "local): this job reserves 4.0 GPU-hours at most and your queued and running jobs "
            "hold 1.0; 1.0 are left: use --time 00:15:00") in text, text
    # The fix as typed: accepted.
    fixed = build_plan(_request(2.0, 1.0, nodes=2, gpus_per_node=2, time="00:15:00"))
    assert fixed.gpu_hours == 1.0
    with pytest.raises(PlanError, match="wait for your jobs to end"):
        build_plan(_request(2.0, 1.9, nodes=2, gpus_per_node=2, time="01:00:00"))


def test_a_chain_and_an_array_count_every_segment_and_task() -> None:
    with pytest.raises(PlanError, match="reserves 3.0 GPU-hours"):
        build_plan(_request(2.0, 0.0, gpus_per_node=1, time="01:00:00", chain=3))
    array = SweepArray(offset=0, size=20, throttle=None, width=2)
    with pytest.raises(PlanError, match="reserves 10.0 GPU-hours"):
        build_plan(_request(5.0, 0.0, gpus_per_node=1, time="00:30:00", array=array))


def test_without_an_answer_from_slurm_the_job_alone_is_checked_and_said() -> None:
    plan = build_plan(_request(2.0, None, gpus_per_node=1, time="00:30:00"))
    assert any("checked against this job alone" in n for n in plan.notes)


def test_a_budget_must_be_positive(tmp_path: Path) -> None:
    from hpctrain.profiles.loader import load_profile_file

    bad = tmp_path / "mine.yaml"
    bad.write_text("extends: local\nname: mine\nbudget_gpu_hours: -3\n")
    with pytest.raises(Exception, match="budget_gpu_hours"):
        load_profile_file(bad)
