"""Reading and following log files, and how often following asks SLURM (recorded answers)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from hpctrain.cli.jobview import final_line
from hpctrain.errors import HpctrainError
from hpctrain.files.atomic import tail_bytes
from hpctrain.history import History
from hpctrain.slurm.runner import Result
from hpctrain.tracking import logs, selection
from hpctrain.tracking.watcher import POLL_INTERVAL_S, JobWatcher

from .helpers import ReplayClient, recorded_jobs, recording, track

J = recorded_jobs()
CLUSTER = "hpctrain-dev"


def test_tail_bytes(tmp_path: Path) -> None:
    f = tmp_path / "log"
    f.write_bytes(b"".join(b"line %d\n" % i for i in range(1, 10001)))
    data, size = tail_bytes(f, 3)
    assert data == b"line 9998\nline 9999\nline 10000\n" and size == f.stat().st_size
    f.write_bytes(b"a\nb\nno newline at end")
    assert tail_bytes(f, 2)[0] == b"b\nno newline at end"
    assert tail_bytes(f, 0)[0] == b""
    assert tail_bytes(f, 50)[0] == b"a\nb\nno newline at end"


def test_file_follower_reads_only_new_bytes(tmp_path: Path) -> None:
    f = tmp_path / "sub" / "log"
    follower = logs.FileFollower(f)
    assert follower.read_new() == b""  # not there yet
    f.parent.mkdir()
    f.write_bytes(b"one\n")
    assert follower.read_new() == b"one\n"
    assert follower.read_new() == b""
    with open(f, "ab") as fh:
        fh.write(b"two\n")
    assert follower.read_new() == b"two\n" and follower.offset == 8
    f.write_bytes(b"new\n")  # truncated and rewritten (a requeued job)
    assert follower.read_new() == b"new\n"


def test_pick_defaults_to_last_job(history: History) -> None:
    with pytest.raises(HpctrainError, match="no job has been submitted"):
        selection.pick(history, None)
    track(history, "1", "2")
    assert selection.pick(history, None).job_id == "2"
    assert selection.pick(history, "1").job_id == "1"
    with pytest.raises(HpctrainError, match="not in the history"):
        selection.pick(history, "77")


class FakeTime:
    """A clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _sequence(*answers: Result) -> Callable[[tuple[str, ...]], Result]:
    """Successive answers to successive calls (the last one repeats)."""
    calls = iter(range(10**6))

    def answer(argv: tuple[str, ...]) -> Result:
        return answers[min(next(calls), len(answers) - 1)]

    return answer


def test_follow_prints_growth_and_asks_slurm_at_most_every_5s(
    history: History, tmp_path: Path
) -> None:
    out_file = tmp_path / "job.out"
    (rec,) = track(history, J["running2"], stdout_path=str(out_file))
    t = FakeTime()
    lines = [b"hpctrain: start\n", b"node1\n", b"node2\n", b"epoch 1\n"]

    def sleep(seconds: float) -> None:
        t.sleep(seconds)
        # The job writes a line every 3 s of fake time.
        due = int((t.now - 1000.0) // 3)
        if due and due <= len(lines) and (not out_file.exists() or
                                           out_file.read_bytes().count(b"\n") < due):
            with open(out_file, "ab") as fh:
                fh.write(lines[due - 1])

    client = ReplayClient({
        # Running for the first polls, then gone from squeue (purged), then sacct: COMPLETED.
        "squeue": _sequence(*map(recording, ("squeue_mixed", "squeue_mixed", "squeue_after"))),
        "sacct": recording("sacct_after"),
    })
    written: list[bytes] = []
    notes: list[str] = []
    result = logs.follow(rec, JobWatcher(client, history, CLUSTER), written.append, notes.append,
                         clock=t.clock, sleep=sleep)
    assert b"".join(written) == b"".join(lines)
    assert result.record.state == "COMPLETED" and result.record.terminal
    kinds = [c[0] for c in client.calls]
    assert kinds == ["squeue", "squeue", "squeue", "sacct"]
    gaps = [b - a for a, b in zip(result.slurm_call_times, result.slurm_call_times[1:],
                                  strict=False)]
    assert gaps and min(gaps) >= POLL_INTERVAL_S
    assert final_line(result.record) == f"job {J['running2']} COMPLETED"


def test_follow_reports_pending_reason_then_failure(history: History, tmp_path: Path) -> None:
    (rec,) = track(history, J["failed"], stdout_path=str(tmp_path / "never.out"))
    t = FakeTime()
    # Pending (Dependency, from the recording of another job), then FAILED in squeue,
    # then sacct's exit code.
    pending = recording("squeue_mixed")
    dep_line = next(ln for ln in pending.stdout.splitlines() if ln.startswith(J["dependency"]))
    failed_line = next(ln for ln in pending.stdout.splitlines() if ln.startswith(J["failed"]))
    # The recording's own command line, with its answer cut down to one job.
    as_failed_pending = dataclasses.replace(
        pending, stdout=dep_line.replace(J["dependency"], J["failed"], 1) + "\n")
    client = ReplayClient({
        "squeue": _sequence(as_failed_pending,
                            dataclasses.replace(pending, stdout=failed_line + "\n")),
        "sacct": recording("sacct_mixed"),
    })
    notes: list[str] = []
    result = logs.follow(rec, JobWatcher(client, history, CLUSTER), lambda b: None,
                         notes.append, clock=t.clock, sleep=t.sleep)
    assert notes[0] == f"job {J['failed']} is PENDING (Dependency)"
    assert result.record.state == "FAILED" and result.record.exit_code == 3
    assert final_line(result.record) == f"job {J['failed']} FAILED (exit code 3)"
    assert not result.saw_file


def test_follow_without_accounting_ends_with_scontrol(history: History, tmp_path: Path) -> None:
    (rec,) = track(history, J["completed"], stdout_path=str(tmp_path / "x.out"))
    t = FakeTime()
    client = ReplayClient({
        "squeue": recording("squeue_unknown"),   # purged from the controller
        "sacct": recording("sacct_disabled"),
        "scontrol": recording("scontrol_unknown"),
    })
    result = logs.follow(rec, JobWatcher(client, history, CLUSTER), lambda b: None, lambda s: None,
                         clock=t.clock, sleep=t.sleep)
    assert [c[0] for c in client.calls] == ["squeue", "sacct", "scontrol"]
    # Nobody knows the job: it ends with the last state seen, marked as a guess.
    assert result.record.stale and final_line(result.record).endswith("PENDING?")


def _ends_at(t: FakeTime, end: float) -> ReplayClient:
    """squeue shows the job running until fake time `end`, then no more; sacct: COMPLETED."""
    return ReplayClient({
        "squeue": lambda argv: recording("squeue_mixed" if t.now < end else "squeue_after"),
        "sacct": recording("sacct_after"),
    })


def test_follow_asks_slurm_at_once_when_the_logs_writer_closes_it(
    history: History, tmp_path: Path
) -> None:
    """The back-off has grown to 15 s by the job's end; the file's close (the batch step's
    end, heard through inotify) makes it ask at once: it returns within a second, not 15."""
    (rec,) = track(history, J["running2"], stdout_path=str(tmp_path / "job.out"))
    t = FakeTime()
    end = 1060.0
    client = _ends_at(t, end)
    # SLURM lets the job go 0.2 s after the close, as on the dev cluster.
    result = logs.follow(rec, JobWatcher(client, history, CLUSTER), lambda b: None,
                         lambda s: None, clock=t.clock, sleep=t.sleep,
                         closed=lambda: t.now >= end - 0.2)
    assert result.record.state == "COMPLETED" and result.record.terminal
    assert t.now - end < 1.0, t.now - end
    times = result.slurm_call_times
    # Before the close: the back-off's pace; after it: the quick asks, the last one sacct's.
    before = [b - a for a, b in zip(times, times[1:], strict=False) if b < end - 0.2]
    assert before and min(before) >= POLL_INTERVAL_S
    assert [c[0] for c in client.calls][-2:] == ["squeue", "sacct"]


def test_a_log_closed_while_the_job_runs_costs_a_few_asks_at_most(
    history: History, tmp_path: Path
) -> None:
    """A program that opens and closes its own log (`>> log`) every second looks like an end
    each time: SLURM is asked at most 4 times in END_HINT_EVERY_S for it, not every second."""
    (rec,) = track(history, J["running2"], stdout_path=str(tmp_path / "job.out"))
    t = FakeTime()
    end = 1120.0
    client = _ends_at(t, end)
    # Closed during the first half of each second, written (open again) in the second half.
    result = logs.follow(rec, JobWatcher(client, history, CLUSTER), lambda b: None,
                         lambda s: None, clock=t.clock, sleep=lambda s: t.sleep(min(s, 0.25)),
                         closed=lambda: t.now % 1.0 < 0.5)
    assert result.record.state == "COMPLETED"
    running = [c for c in result.slurm_call_times if c < end]
    per_window = max(sum(1 for c in running if w <= c < w + logs.END_HINT_EVERY_S)
                     for w in running)
    assert per_window <= len(logs.END_ASK_GAPS_S) + 2, running
    assert len(running) <= 4 * (end - 1000.0) / logs.END_HINT_EVERY_S


def test_a_closed_log_is_read_once_at_the_end_not_for_a_grace_second(
    history: History, tmp_path: Path
) -> None:
    out = tmp_path / "job.out"
    out.write_text("last line\n")
    (rec,) = track(history, J["running2"], stdout_path=str(out))
    t = FakeTime()
    client = _ends_at(t, 0.0)  # over already
    written: list[bytes] = []
    logs.follow(rec, JobWatcher(client, history, CLUSTER), written.append, lambda s: None,
                clock=t.clock, sleep=t.sleep, closed=lambda: True)
    assert b"".join(written) == b"last line\n"
    assert t.now - 1000.0 < logs.DRAIN_GRACE_S
