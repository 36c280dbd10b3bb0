"""Waiting for a log to grow: inotify on a local file system, a short poll on a network one
(places/filewait.py); `logs -f` wakes on the write itself, not on its next poll."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from hpctrain.places import filewait
from hpctrain.tracking.logs import FileFollower


def test_a_local_directory_is_watched_with_inotify(tmp_path: Path) -> None:
    waiter = filewait.waiter_for(tmp_path / "job-1.out")
    try:
        assert waiter.kind == "inotify"
    finally:
        waiter.close()


def test_a_network_file_system_is_polled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    monkeypatch.setattr(filewait, "fs_type", lambda path: 0x6969)
    waiter = filewait.waiter_for(tmp_path / "job-1.out")
    assert waiter.kind == "poll (nfs)"
    assert filewait.waiter_for(tmp_path / "missing" / "job.out").kind.startswith("poll")


def test_the_file_system_is_named_by_statfs(tmp_path: Path) -> None:
    kind = filewait.fs_type(tmp_path)
    assert isinstance(kind, int) and kind not in filewait.NETWORK_FS
    assert filewait.fs_type(tmp_path / "nope") is None


def test_inotify_wakes_on_the_write_not_on_the_timeout(tmp_path: Path) -> None:
    """The wait may last 60 s; the write, made by another thread once the wait has begun, ends
    it: the waiter says the kernel woke it (a timeout would say False)."""
    log = tmp_path / "job-1.out"
    follower = FileFollower(log)
    waiter = filewait.waiter_for(log)
    writer = threading.Thread(target=lambda: log.write_text("line 1\n"))
    try:
        writer.start()
        assert waiter.wait(60.0) is True
    finally:
        writer.join()
        waiter.close()
    assert follower.read_new() == b"line 1\n"


def test_a_poll_waits_no_longer_than_asked(tmp_path: Path) -> None:
    waiter = filewait.PollWaiter(interval_s=0.0)
    assert waiter.wait(60.0) is False  # at once: the interval bounds it; no event is known
    waiter.close()


def test_inotify_hears_the_logs_last_writer_close_it(tmp_path: Path) -> None:
    """SLURM's batch step holds the job's stdout open to the job's end: the close is the end.
    A write after it opens the story again; another file's close in the directory is not it."""
    log = tmp_path / "job-1.out"
    waiter = filewait.waiter_for(log)
    try:
        fh = log.open("ab")
        fh.write(b"line 1\n")
        fh.flush()
        assert waiter.wait(5.0) and not waiter.writer_closed()
        (tmp_path / "other.out").write_text("x\n")
        waiter.wait(0.5)
        assert not waiter.writer_closed()
        fh.close()
        assert waiter.wait(5.0) and waiter.writer_closed()
        with log.open("ab") as again:
            again.write(b"line 2\n")
            again.flush()
            waiter.wait(5.0)
            assert not waiter.writer_closed()
        waiter.wait(5.0)
        assert waiter.writer_closed()
    finally:
        waiter.close()
    assert not filewait.PollWaiter().writer_closed()
