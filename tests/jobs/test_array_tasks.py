"""A sweep's points (job array tasks, `ARRAY_TASK`) asked of SLURM by their array's id, on output
recorded from the dev cluster (recorded/record.py arrays) on SLURM 22.05 and 24.11: text on
both, since JSON names a task by its own job id."""

from __future__ import annotations

import json

import pytest

from hpctrain.history import History
from hpctrain.slurm import parsers
from hpctrain.slurm.states import JobState
from hpctrain.tracking.watcher import JobWatcher

from .helpers import RECORDED, ReplayClient, recording, track

SETS = ("slurm-22.05", "slurm-24.11")


def _tasks(slurm: str) -> list[str]:
    array = json.loads((RECORDED.parent / slurm / "arrays.json").read_text())["array"]
    return [f"{array}_{t}" for t in range(8)]


def _client(slurm: str, sacct: str = "sacct_array_tasks") -> ReplayClient:
    return ReplayClient({"squeue": recording("squeue_array_tasks", slurm),
                         "sacct": recording(sacct, slurm)}, slurm=slurm)


@pytest.mark.parametrize("slurm", SETS)
def test_squeue_lists_every_task_of_the_array_asked_by_its_id(slurm: str) -> None:
    TASKS = _tasks(slurm)
    ARRAY = TASKS[0].split("_")[0]
    client = _client(slurm)
    rows = client.squeue(TASKS)
    (argv,) = client.calls
    assert argv[argv.index("--jobs") + 1] == ARRAY and "--array" in argv
    assert set(rows) == set(TASKS)
    assert rows[TASKS[2]].state is JobState.RUNNING
    assert rows[TASKS[5]].state is JobState.PENDING
    assert rows[TASKS[5]].reason == "JobArrayTaskLimit"


@pytest.mark.parametrize("slurm", SETS)
def test_sacct_names_tasks_and_spreads_the_row_of_tasks_never_started(slurm: str) -> None:
    TASKS = _tasks(slurm)
    rows = _client(slurm).sacct(TASKS)
    assert set(rows) == set(TASKS)
    assert (rows[TASKS[1]].state, rows[TASKS[1]].exit_code) == (JobState.FAILED, 3)
    assert all(rows[t].state is JobState.PENDING for t in TASKS[4:])
    cancelled = _client(slurm, "sacct_array_cancelled").sacct(TASKS)
    assert all(cancelled[t].state is JobState.CANCELLED for t in TASKS[2:])
    assert cancelled[TASKS[0]].state is JobState.COMPLETED


@pytest.mark.parametrize("slurm", SETS)
def test_a_refresh_of_all_points_is_two_calls(history: History, slurm: str) -> None:
    TASKS = _tasks(slurm)
    ARRAY = TASKS[0].split("_")[0]
    track(history, *TASKS)
    client = _client(slurm)
    records, report = JobWatcher(client, history, "hpctrain-dev").refresh(history.all())
    assert report.calls == len(client.calls) == 2
    sacct = client.calls[1]
    assert sacct[0] == "sacct" and sacct[sacct.index("--jobs") + 1] == ARRAY
    got = {r.job_id: r for r in records}
    assert got[TASKS[0]].state == "COMPLETED" and got[TASKS[0]].terminal
    assert got[TASKS[1]].state == "FAILED" and got[TASKS[1]].exit_code == 3
    assert got[TASKS[3]].state == "RUNNING" and got[TASKS[7]].state == "PENDING"


def test_array_ids_of_tasks() -> None:
    assert parsers.array_task_ids("12_[4-6,9%2]") == ["12_4", "12_5", "12_6", "12_9"]
    assert parsers.array_task_ids("12_3") == ["12_3"] and parsers.array_task_ids("77") == ["77"]
    assert parsers.is_array_task("12_3") and not parsers.is_array_task("12+0")
    assert parsers.array_of("12_3") == "12" and parsers.array_of("77") == "77"
