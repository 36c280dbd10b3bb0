"""Maintenance windows (issue 42): SLURM's reservations read from recorded `scontrol show
reservation` output (22.05), a time limit that runs into a window refused with the longest
time before it and the rest as a chain, and `why` of a job already waiting for one. On the dev
cluster: tests/jobs/test_maintenance_cluster.py."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from hpctrain.diagnosis.causes import diagnose
from hpctrain.diagnosis.model import Evidence
from hpctrain.errors import PlanError
from hpctrain.plan import JobRequest, build_plan
from hpctrain.profiles import load_profile
from hpctrain.slurm import reservations
from hpctrain.slurm.accounting import Accounting, summary_row
from hpctrain.slurm.states import JobState
from hpctrain.values.units import parse_time_seconds

RECORDED = Path(__file__).resolve().parent / "recorded" / "slurm-22.05"
TRAINER = ("python", "-m", "hpctrain.trainer")


def _recorded(name: str) -> list[reservations.Reservation]:
    return reservations.parse((RECORDED / f"scontrol_show_reservation_{name}.txt").read_text())


def test_reservations_as_scontrol_prints_them() -> None:
    assert _recorded("none") == []
    (maint,) = _recorded("maint")
    assert maint.name == "maint-test" and maint.maintenance
    assert maint.nodes == ("node1", "node2") and maint.end - maint.start == 3600
    three = {r.name: r for r in _recorded("three")}
    assert set(three) == {"maint-test", "lab course", "teaching"}  # a name with a space
    assert three["lab course"].nodes == ("node2",) and three["lab course"].maintenance
    assert not three["teaching"].maintenance
    assert [r.name for r in reservations.maintenance(three.values())] == [
        "maint-test", "lab course"]


def _request(window: reservations.Reservation, minutes_before: float, time: str,
             **kw: object) -> JobRequest:
    """A request read `minutes_before` the window starts, with the dev cluster's partition."""
    return JobRequest(profile=load_profile("local"), command=TRAINER, time=time,
                      maintenance=(window,), now=window.start - minutes_before * 60,
                      partition_nodes={"debug": ("node1", "node2")},
                      **kw)  # type: ignore[arg-type]


def test_a_time_that_runs_into_the_window_is_refused_with_a_fix_that_is_accepted() -> None:
    (window,) = _recorded("maint")
    with pytest.raises(PlanError) as refused:
        build_plan(_request(window, 30, "02:00:00"))
    text = str(refused.value)
    assert "runs into maintenance reservation 'maint-test'" in text, text
    assert "--time 00:25:00 --chain 5" in text, text
    # The fix as a user types it: accepted, a chain of five 25-minute segments.
    m = re.search(r"--time (\S+) --chain (\d+)", text)
    assert m is not None
    plan = build_plan(_request(window, 30, m.group(1), chain=int(m.group(2))))
    assert plan.time_seconds == parse_time_seconds("00:25:00") and plan.chain == 5
    # A job that ends before the window is accepted as it is.
    assert build_plan(_request(window, 30, "00:10:00")).time_seconds == 600


def test_a_window_on_some_nodes_leaves_the_others() -> None:
    lab = {r.name: r for r in _recorded("three")}["lab course"]  # node2 only
    one = build_plan(_request(lab, 30, "02:00:00", gpus_per_node=1))
    assert one.nodes == 1
    with pytest.raises(PlanError, match="'lab course' \\(node2 of partition debug"):
        build_plan(_request(lab, 30, "02:00:00", nodes=2, gpus_per_node=1))


def test_a_window_that_is_on_now_says_when_it_ends() -> None:
    (window,) = _recorded("maint")
    with pytest.raises(PlanError, match="is on now: the job would wait until it ends"):
        build_plan(_request(window, -10, "00:10:00"))
    # Too close to the window for a useful segment: wait, or another partition.
    with pytest.raises(PlanError, match="submit after") as close:
        build_plan(_request(window, 8, "01:00:00"))
    assert "--chain" not in str(close.value)


def test_a_command_of_ones_own_gets_a_shorter_time_without_a_chain() -> None:
    (window,) = _recorded("maint")
    with pytest.raises(PlanError) as refused:
        build_plan(dataclasses.replace(_request(window, 30, "02:00:00"), command=("true",)))
    assert "use --time 00:25:00 if the command finishes in that" in str(refused.value)


def test_why_of_a_job_waiting_for_the_window_names_it_and_the_fix() -> None:
    (window,) = _recorded("maint")
    row = summary_row("7", JobState.PENDING, "PENDING", exit_code=None, signal=None,
                      elapsed_s=0, time_limit_s=7200, node_list=None)
    reason = "ReqNodeNotAvail, Reserved for maintenance"
    ev = Evidence("7", Accounting((row,)), pending_reason=reason, maintenance=(window,),
                  now=window.start - 30 * 60)
    got = diagnose(ev)
    assert got.cause == "pending"
    assert "waits for maintenance reservation 'maint-test'" in got.summary, got.summary
    assert "--time 00:25:00 --chain 5" in got.fix and "let it wait until" in got.fix
    # Without the reservations (SLURM could not say): the reason in plain words.
    plain = diagnose(dataclasses.replace(ev, maintenance=()))
    assert "reserved (often before a maintenance): Reserved for maintenance" in plain.summary
    assert "man squeue" not in plain.fix
