"""--stall-window and --on-stall (issue 41): checked in the plan, handed to the monitor's
stall watch through the script, noted where they cannot work as asked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hpctrain.errors import PlanError
from hpctrain.plan import JobRequest, build_plan
from hpctrain.profiles import load_profile


def _plan(**kw: object):  # type: ignore[no-untyped-def]
    return build_plan(JobRequest(profile=load_profile("local"), **kw))  # type: ignore[arg-type]


def test_the_window_and_action_reach_the_monitor(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "hpctrain", "render", "-P", "local", "-o", "-",
         "--stall-window", "30", "--on-stall", "requeue", "--ignore-quarantine", "--",
         "python", "t.py"],
        capture_output=True, text=True, timeout=60, check=True, cwd=tmp_path)
    assert "export HPCTRAIN_STALL_WINDOW=30 HPCTRAIN_ON_STALL=requeue\n" in out.stdout
    assert "from its start: only the packaged trainer resumes" in out.stdout


@pytest.mark.parametrize("argv", [
    ["submit", "-P", "local", "--dry-run", "--stall-window", "off", "--on-stall", "report",
     "--retries", "1"],
    ["sweep", "-P", "local", "--dry-run", "--stall-window", "off", "--on-stall", "report",
     "--grid", "optim.lr=0.1,0.01", "--ignore-quarantine"]])
def test_submit_and_sweep_take_them_too(tmp_path: Path, argv: list[str]) -> None:
    out = subprocess.run([sys.executable, "-m", "hpctrain", *argv], capture_output=True,
                         text=True, timeout=60, check=False, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "export HPCTRAIN_STALL_WINDOW=off HPCTRAIN_ON_STALL=report" in out.stdout
    assert "No stall watch (--stall-window off)" in out.stdout


def test_the_default_window_is_derived_and_off_is_off() -> None:
    plan = _plan()
    assert (plan.stall_window, plan.on_stall) == ("", "cancel")
    assert plan.summary()["stall_window"] == "auto"
    assert _plan(stall_window="off").stall_window == "off"


@pytest.mark.parametrize(("kw", "words"), [
    ({"stall_window": "5"}, "at least 10"), ({"stall_window": "ten"}, "whole seconds"),
    ({"on_stall": "kill"}, "choose one of cancel, requeue, report")])
def test_bad_values_are_refused(kw: dict[str, str], words: str) -> None:
    with pytest.raises(PlanError) as e:
        _plan(**kw)
    assert words in str(e.value)


def test_no_monitor_means_no_watch_and_says_so() -> None:
    plan = _plan(monitor_interval_s=None, stall_window="60")
    assert any("no stall watch" in n for n in plan.notes)


def test_retries_reach_the_script_and_make_it_requeueable(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "hpctrain", "render", "-P", "local", "-o", "-", "--retries", "2",
         "--", "python", "t.py"],
        capture_output=True, text=True, timeout=60, check=True, cwd=tmp_path)
    assert 'export HPCTRAIN_RETRIES_LEFT="${HPCTRAIN_RETRIES_LEFT:-2}"' in out.stdout
    assert "#SBATCH --requeue\n" in out.stdout
    assert _plan(retries=2).summary()["retries"] == 2


@pytest.mark.parametrize(("kw", "words"), [
    ({"retries": 11}, "give 1 to 10"), ({"retries": 1, "chain": 2}, "--chain shares its run"),
    ({"retries": 1, "race": "1x1"}, "--first-of shares")])
def test_retries_are_for_one_job(kw: dict[str, object], words: str) -> None:
    with pytest.raises(PlanError) as e:
        _plan(**kw)
    assert words in str(e.value)


def test_a_sweep_refuses_retries(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "hpctrain", "sweep", "-P", "local", "--dry-run",
                          "--retries", "1", "--grid", "optim.lr=0.1,0.01"],
                         capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    assert out.returncode == 1 and "a sweep shares its run directory" in out.stderr, out.stderr


def test_retries_are_refused_where_no_retry_could_leave_a_node_out() -> None:
    """Issue 51: on a 2-node partition a 2-node job's retry (`sbatch --exclude=NODE`) is
    refused by SLURM; the plan says so, with the change that it accepts."""
    nodes = {"debug": ("node1", "node2")}
    with pytest.raises(PlanError) as e:
        _plan(nodes=2, gpus_per_node=1, retries=1, partition_nodes=nodes)
    assert ("--retries 1: a retry runs without the stalled node, but the job needs 2 of "
            "partition debug's 2 node(s), so SLURM would refuse every retry: ask for at most "
            "1 node(s), or drop --retries") in str(e.value)
    assert "--nodes 1" in str(e.value)  # the nearest accepted request, searched for
    assert _plan(nodes=1, gpus_per_node=1, retries=1, partition_nodes=nodes).retries == 1
    assert _plan(nodes=2, gpus_per_node=1, partition_nodes=nodes).nodes == 2
    # Nothing listed the partition's nodes (render, a dry run without SLURM): no refusal.
    assert _plan(nodes=2, gpus_per_node=1, retries=1).retries == 1


def test_the_profiles_node_counts_size_a_partition_without_slurm() -> None:
    from hpctrain.plan.stall import profile_size, retry_room
    from hpctrain.profiles.model import NodeType, Partition

    types = [NodeType(name="a", gpus=2, cpus=8, mem_mb=1000, nodes=2),
             NodeType(name="b", gpus=2, cpus=8, mem_mb=1000, nodes=1)]
    part = Partition(name="p", max_time="01:00:00", node_types=types)
    assert profile_size(part) == 3
    assert profile_size(load_profile("local").partitions[0]) is None
    req = JobRequest(profile=load_profile("local"), retries=2)
    assert "at most 2 node(s)" in retry_room(req, part, 3).misfits[0]
    assert not retry_room(req, part, 2).misfits
    one = Partition(name="one", max_time="01:00:00", node_types=types[1:])
    assert retry_room(req, one, 1).misfits[0].endswith("every retry: drop --retries")
