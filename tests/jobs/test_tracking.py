"""Refreshing tracked jobs from recorded SLURM answers: two calls at most, terminal caching,
and clean degradation without accounting."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from hpctrain.cli.jobview import display_state
from hpctrain.history import History, StateUpdate
from hpctrain.slurm.runner import Result
from hpctrain.tracking.watcher import JobWatcher

from .helpers import RECORDED, SETS, ReplayClient, recorded_jobs, recording, track

J = recorded_jobs()
CLUSTER = "hpctrain-dev"


def _client(squeue: str, sacct: str, scontrol: str = "scontrol_unknown") -> ReplayClient:
    return ReplayClient({"squeue": recording(squeue), "sacct": recording(sacct),
                         "scontrol": recording(scontrol), "scancel": recording("scancel_done")})


def _arg(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_one_refresh_is_two_calls_and_caches_terminal_states(history: History) -> None:
    track(history, *J.values())
    client = _client("squeue_mixed", "sacct_mixed")
    records, report = JobWatcher(client, history, CLUSTER).refresh(history.all())
    assert report.calls == len(client.calls) == 2 and report.asked == len(J)
    squeue, sacct = client.calls
    assert squeue[0] == "squeue" and sorted(_arg(squeue, "--jobs").split(",")) == sorted(J.values())
    # sacct is asked only about jobs squeue shows ended without an exit code (or not at all).
    assert sorted(_arg(sacct, "--jobs").split(",")) == sorted([J["failed"], J["cancelled"]])
    got = {r.job_id: r for r in records}
    assert got[J["completed"]].state == "COMPLETED" and got[J["completed"]].terminal
    assert got[J["completed"]].exit_code == 0
    assert got[J["failed"]].state == "FAILED" and got[J["failed"]].exit_code == 3
    assert got[J["failed"]].terminal
    assert got[J["cancelled"]].state == "CANCELLED" and got[J["cancelled"]].terminal
    assert got[J["running2"]].state == "RUNNING" and got[J["running2"]].node_list == "node[1-2]"
    assert got[J["dependency"]].state == "PENDING" and got[J["dependency"]].reason == "Dependency"
    assert not got[J["dependency"]].terminal
    # Stored, not just returned.
    assert {r.job_id: r.state for r in history.all()} == {k: v.state for k, v in got.items()}

    # The next refresh asks only about the unfinished ones.
    client2 = _client("squeue_after", "sacct_after")
    records, report = JobWatcher(client2, history, CLUSTER).refresh(history.all())
    assert report.calls == 2
    asked = set(_arg(client2.calls[0], "--jobs").split(","))
    assert asked == {J[k] for k in ("running2", "dependency", "begintime", "resources",
                                    "timeout")}
    got = {r.job_id: r for r in records}
    assert got[J["timeout"]].state == "TIMEOUT" and got[J["timeout"]].terminal
    assert got[J["begintime"]].state == "CANCELLED"
    assert all(r.terminal for r in records)

    # Everything is final now: no SLURM call at all.
    client3 = _client("squeue_after", "sacct_after")
    _, report = JobWatcher(client3, history, CLUSTER).refresh(history.all())
    assert client3.calls == [] and report.calls == 0


def test_a_thousand_jobs_still_take_two_calls(history: History) -> None:
    track(history, *(str(100000 + i) for i in range(1000)), *J.values())
    client = _client("squeue_mixed", "sacct_mixed")
    records, report = JobWatcher(client, history, CLUSTER).refresh(history.all())
    assert len(client.calls) == 2 and report.asked == 1008
    # Jobs neither squeue nor sacct know keep their last state, marked stale.
    unknown = [r for r in records if r.job_id.startswith("100")]
    assert all(r.stale and r.state == "PENDING" and not r.terminal for r in unknown)
    assert display_state(unknown[0]) == "PENDING?"


def test_lagging_accounting_does_not_freeze_a_state_without_exit_code(history: History) -> None:
    # squeue (later) says TIMEOUT while sacct (earlier) still says PENDING: slurmdbd lags.
    track(history, J["timeout"])
    watcher = JobWatcher(_client("squeue_after", "sacct_mixed"), history, CLUSTER)
    records, _ = watcher.refresh(history.all())
    (rec,) = records
    assert rec.state == "TIMEOUT" and not rec.terminal
    watcher = JobWatcher(_client("squeue_after", "sacct_after"), history, CLUSTER)
    records, _ = watcher.refresh(history.all())
    assert records[0].state == "TIMEOUT" and records[0].terminal


def test_accounting_off_falls_back_to_scontrol_then_last_state(history: History) -> None:
    track(history, *J.values())
    client = _client("squeue_mixed", "sacct_disabled", scontrol="scontrol_unknown")
    records, report = JobWatcher(client, history, CLUSTER).refresh(history.all())
    assert any("accounting storage is disabled" in w for w in report.warnings)
    kinds = [c[0] for c in client.calls]
    assert kinds[:2] == ["squeue", "sacct"]
    # scontrol only for jobs squeue saw end without an exit code, and a bounded number.
    assert kinds[2:] == ["scontrol"] * 2
    got = {r.job_id: r for r in records}
    # Without accounting the state squeue saw is final, exit code unknown.
    assert got[J["failed"]].state == "FAILED" and got[J["failed"]].terminal
    assert got[J["failed"]].exit_code is None
    assert got[J["running2"]].state == "RUNNING"


def test_accounting_off_uses_scontrol_exit_code(history: History) -> None:
    # scontrol's answer (recorded for the completed job) gives the exit code when sacct can't.
    track(history, J["failed"])
    scontrol_done = recording("scontrol_completed")
    text = scontrol_done.stdout.replace(f"JobId={J['completed']}", f"JobId={J['failed']}")
    text = text.replace("JobState=COMPLETED", "JobState=FAILED").replace(
        "ExitCode=0:0", "ExitCode=3:0")
    client = ReplayClient({"squeue": recording("squeue_mixed"),
                           "sacct": recording("sacct_disabled"),
                           "scontrol": dataclasses.replace(scontrol_done, stdout=text)})
    (rec,), _ = JobWatcher(client, history, CLUSTER).refresh(history.all())
    assert rec.state == "FAILED" and rec.exit_code == 3 and rec.terminal


def test_jobs_of_other_clusters_are_not_asked(history: History) -> None:
    track(history, "1", cluster="raven")
    client = _client("squeue_mixed", "sacct_mixed")
    records, report = JobWatcher(client, history, CLUSTER).refresh(history.all())
    assert client.calls == [] and records[0].state == "PENDING"
    assert "raven" in report.warnings[0]


def test_cancel_sends_one_scancel_for_unfinished_jobs_of_this_cluster(history: History) -> None:
    _one, _two, three = track(history, "1", "2", "3")
    track(history, "4", cluster="raven")
    history.update([StateUpdate(id=three.id, state="COMPLETED", terminal=True, stale=False)])
    client = _client("squeue_mixed", "sacct_mixed")
    report = JobWatcher(client, history, CLUSTER).cancel(history.all())
    assert client.calls == [("scancel", "1", "2")]
    assert report.cancelled == ["1", "2"]
    assert report.skipped == {"3": "already COMPLETED",
                              "4": "runs on cluster raven, this is hpctrain-dev"}
    assert report.as_dict()["skipped"][0] == {"job_id": "3", "reason": "already COMPLETED"}


def test_the_watcher_never_asks_again_about_a_job_it_saw_finish(history: History) -> None:
    track(history, *J.values())
    before = history.all()  # rows as they were: all unfinished
    watcher = JobWatcher(_client("squeue_mixed", "sacct_mixed"), history, CLUSTER)
    watcher.refresh(before)
    cancelled = watcher.cancel(before)
    assert cancelled.skipped[J["completed"]] == "already COMPLETED"
    assert J["running2"] in cancelled.cancelled
    client = _client("squeue_after", "sacct_after")
    watcher.client = client
    records, report = watcher.refresh(before)
    finished = {J["completed"], J["failed"], J["cancelled"]}
    assert finished.isdisjoint(_arg(client.calls[0], "--jobs").split(","))
    assert report.asked == len(J) - len(finished)
    got = {r.job_id: r for r in records}
    assert got[J["failed"]].state == "FAILED" and got[J["failed"]].exit_code == 3


def _running_then_gone(running_polls: int) -> ReplayClient:
    """squeue shows the job running `running_polls` times, then no more; sacct: COMPLETED."""
    answers = iter([recording("squeue_mixed")] * running_polls)
    return ReplayClient({"squeue": lambda argv: next(answers, recording("squeue_after")),
                         "sacct": recording("sacct_after")})


def test_polling_backs_off_while_nothing_changes_and_resets_on_a_change(
    history: History,
) -> None:
    (rec,) = track(history, J["running2"])
    client = _running_then_gone(8)
    watcher = JobWatcher(client, history, CLUSTER)
    polls = []
    while not polls or not polls[-1].done:
        polls.append(watcher.poll(polls[-1].record if polls else rec))
    waits = [p.wait_s for p in polls]
    # PENDING -> RUNNING is a change; then nothing changes until squeue forgets the job.
    assert waits[:8] == [5.0, 7.5, 11.25, 15.0, 15.0, 15.0, 15.0, 15.0]
    assert [p.changed for p in polls[8:]] == [True, True] and waits[8] == 5.0
    assert [c[0] for c in client.calls] == ["squeue"] * 9 + ["sacct"]
    assert polls[-1].record.state == "COMPLETED" and polls[-1].record.terminal
    # A finished job costs nothing more.
    assert watcher.poll(rec).done and len(client.calls) == 10


def test_wait_for_change_sleeps_with_back_off(history: History) -> None:
    (rec,) = track(history, J["running2"])
    watcher = JobWatcher(_running_then_gone(3), history, CLUSTER)
    slept: list[float] = []
    first = watcher.wait_for_change(rec, sleep=slept.append)
    assert first.record.state == "RUNNING" and slept == []
    second = watcher.wait_for_change(first.record, sleep=slept.append)
    assert slept == [7.5, 11.25] and second.changed and not second.done
    last = watcher.wait_for_change(second.record, sleep=slept.append)
    assert last.done and last.record.state == "COMPLETED"


# slurmctld down (killed), as squeue reported it on the dev cluster.
DOWN = recording("squeue_controller_down")


def _answers(*squeues: Result) -> ReplayClient:
    """squeue answers these in turn, then "after" (the jobs gone); sacct: COMPLETED and so on."""
    answers = iter(squeues)
    return ReplayClient({"squeue": lambda argv: next(answers, recording("squeue_after")),
                         "sacct": recording("sacct_after")})


def test_wait_until_ended_refreshes_the_jobs_together_until_all_end(history: History) -> None:
    recs = track(history, J["running2"], J["dependency"])
    client = _answers(*[recording("squeue_mixed")] * 4)
    slept: list[float] = []
    fresh, left = JobWatcher(client, history, CLUSTER).wait_until_ended(recs, sleep=slept.append)
    assert left == [] and [r.state for r in fresh] == ["COMPLETED", "COMPLETED"]
    assert all(r.terminal for r in fresh)
    # One refresh (squeue, then sacct only once squeue has let the jobs go) per round: running
    # shows as a change, then the unchanged rounds back off.
    assert [c[0] for c in client.calls] == ["squeue"] * 5 + ["sacct"]
    assert slept == [5.0, 7.5, 11.25, 15.0]


def test_wait_until_ended_rides_out_a_slurm_outage_and_keeps_its_timeout(
    history: History,
) -> None:
    recs = track(history, J["running2"])
    client = _answers(recording("squeue_mixed"), DOWN, DOWN, recording("squeue_mixed"))
    slept: list[float] = []
    watcher = JobWatcher(client, history, CLUSTER)
    fresh, left = watcher.wait_until_ended(recs, sleep=slept.append)
    # The outage is no end: the job is asked about again, and ends when SLURM says so.
    assert left == [] and fresh[0].state == "COMPLETED" and len(slept) == 4

    recs = track(history, "4711")
    forever = ReplayClient({"squeue": recording("squeue_mixed"), "sacct": recording("sacct_after")})
    slept = []
    fresh, left = JobWatcher(forever, history, CLUSTER).wait_until_ended(
        recs, timeout_s=30, sleep=slept.append, clock=lambda: sum(slept))
    # 4711 is in no answer: unfinished, given up on once 30 s have passed.
    assert [r.job_id for r in left] == ["4711"] and sum(slept) > 30 and sum(slept[:-1]) <= 30


def test_restarts_come_from_the_trainers_metrics(history: History, tmp_path: Path) -> None:
    from dataclasses import replace

    from hpctrain.tracking.selection import restarts

    (rec,) = track(history, J["running2"])
    assert restarts(replace(rec, run_dir=None)) is None
    run = tmp_path / "run"
    run.mkdir()
    rec = replace(rec, run_dir=str(run))
    assert restarts(rec) is None  # no metrics.json yet
    (run / "metrics.json").write_text("{not json")
    assert restarts(rec) is None
    starts = [{"slurm_job_id": rec.job_id}] * 3 + [{"slurm_job_id": "other"}]
    (run / "metrics.json").write_text(json.dumps({"restarts": starts}))
    assert restarts(rec) == 2


@pytest.mark.parametrize("slurm", SETS)
def test_a_job_completing_after_a_cancel_shows_cancelled(history: History, slurm: str,
                                                         tmp_path: Path) -> None:
    # squeue lists a cancelled job COMPLETING until its processes are gone; sacct already
    # knows the outcome, so status asks it and shows that, rather than a state that says
    # neither how the job ended nor that it has.
    job = json.loads((RECORDED.parent / slurm / "completing.json").read_text())["job"]
    track(history, job)
    answers = {"squeue": recording("squeue_completing", slurm),
               "sacct": recording("sacct_completing", slurm)}
    client = ReplayClient(dict(answers), slurm)
    (rec,), report = JobWatcher(client, history, CLUSTER).refresh(history.all())
    assert [argv[0] for argv in client.calls] == ["squeue", "sacct"] and report.calls == 2
    assert rec.state == "CANCELLED" and rec.terminal

    # One job followed (logs -f): squeue first, then sacct, one call a poll.
    other = History(tmp_path / "other.db")
    (record,) = track(other, job)
    watcher = JobWatcher(ReplayClient(dict(answers), slurm), other, CLUSTER)
    first = watcher.poll(record)
    assert first.record.state == "COMPLETING" and not first.done
    second = watcher.poll(first.record)
    assert second.record.state == "CANCELLED" and second.done


@pytest.mark.parametrize("slurm", SETS)
def test_completing_before_slurmdbd_knows_the_job_asks_the_controller_again(
        history: History, slurm: str) -> None:
    job = json.loads((RECORDED.parent / slurm / "completing.json").read_text())["job"]
    (record,) = track(history, job)
    # sacct's answer about other jobs: this one is not in slurmdbd yet.
    client = ReplayClient({"squeue": recording("squeue_completing", slurm),
                           "sacct": recording("sacct_after", slurm)}, slurm)
    watcher = JobWatcher(client, history, CLUSTER)
    first = watcher.poll(record)
    second = watcher.poll(first.record)
    assert second.record.state == "COMPLETING" and not second.done
    third = watcher.poll(second.record)
    assert [argv[0] for argv in client.calls] == ["squeue", "sacct", "squeue"]
    assert third.record.state == "COMPLETING" and not third.done
