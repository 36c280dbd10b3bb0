"""Read a job's log, and follow it while the job runs (SLURM is asked through the watcher)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from hpctrain.errors import HpctrainError
from hpctrain.history import JobRecord
from hpctrain.places.local import FILE_POLL_S, FileFollower
from hpctrain.slurm.states import JobState
from hpctrain.tracking.watcher import MAX_POLL_INTERVAL_S, POLL_INTERVAL_S, JobWatcher, Poll

if TYPE_CHECKING:
    from hpctrain.places import Place

__all__ = ["FILE_POLL_S", "FileFollower", "FollowResult", "follow", "follow_at", "log_path"]
# After the job ends the node may still be flushing the file (NFS attribute caches on real
# clusters): read on for this long once nothing new arrives.
DRAIN_GRACE_S = 1.0
# Once the log's last writer has closed it (the batch step's end, seen by inotify), SLURM is
# asked at once and then after these gaps, not after the watcher's back-off (up to 15 s): the
# controller let the job go 0.1 to 0.3 s after the close on the dev cluster. Once squeue has
# let it go, one quick sacct says how it ended; a longer lag gets the watcher's own pace.
END_ASK_GAPS_S = (0.25, 0.5, 1.0)
# A program that closes its log now and then (its own `>> log`) starts such asks at most this
# often: SLURM hears from one `logs -f` at most 4 times in this long.
END_HINT_EVERY_S = POLL_INTERVAL_S


def log_path(record: JobRecord, err: bool = False) -> Path:
    """The job's stdout (or stderr) file as recorded at submit."""
    path = record.stderr_path if err else record.stdout_path
    if not path:
        raise HpctrainError(
            f"job {record.job_id} has no recorded {'stderr' if err else 'output'} file",
            "it was recorded without one; look in its run directory " + (record.run_dir or ""),
        )
    return Path(path)


class Follower(Protocol):
    """What `follow` reads a log through: here a file, for a login a remote one."""

    def read_new(self) -> bytes: ...


class Pause(Protocol):
    """What `follow` waits on for the file to grow (places/filewait.py: inotify, a poll)."""

    def wait(self, timeout_s: float) -> object: ...


@dataclass
class _EndHint:
    """When to ask SLURM because the log's writer closed it, rather than at the back-off's."""

    closed: Callable[[], bool]
    gaps: list[float] = field(default_factory=list)
    was_closed: bool = False
    # A close heard within END_HINT_EVERY_S of the last burst waits until then.
    pending: bool = False
    next_ok: float = float("-inf")

    def check(self, now: float) -> bool:
        """True when SLURM should be asked now: the writer has closed the log."""
        shut = self.closed()
        self.pending = self.pending or (shut and not self.was_closed)
        self.was_closed = shut
        if not self.pending or now < self.next_ok:
            return False
        self.pending = False
        self.next_ok = now + END_HINT_EVERY_S
        self.gaps = list(END_ASK_GAPS_S)
        return True

    def gap(self, poll: Poll) -> float | None:
        """The wait before the next ask while the hint lasts (None: the watcher's own)."""
        if not self.gaps or poll.done:
            self.gaps = []
            return None
        if poll.changed:
            # squeue has let the job go (or shown its end): one quick sacct says how it ended.
            self.gaps = []
            return END_ASK_GAPS_S[0]
        return self.gaps.pop(0)


@dataclass
class FollowResult:
    """How following ended: the job as last stored, and when SLURM was asked."""

    record: JobRecord
    slurm_call_times: list[float] = field(default_factory=list)
    saw_file: bool = False
    # Polls SLURM did not answer (a dead or stopped controller); following went on.
    unanswered: int = 0
    down: bool = False


def _progress_note(said: JobRecord | None, now: JobRecord) -> str | None:
    """What to tell a person waiting on the job: why it is pending, and when it starts."""
    pending = JobState.PENDING.value
    before = (said.state, said.reason) if said is not None else None
    if now.state == pending and before != (now.state, now.reason):
        return f"job {now.job_id} is PENDING ({now.reason or 'not scheduled yet'})"
    if before is not None and before[0] == pending and now.state != pending:
        return f"job {now.job_id} is {now.state}"
    return None


def _outage_note(poll: Poll, was_down: bool) -> str | None:
    """Say once that SLURM does not answer, and once that it answers again."""
    if poll.error is not None and not was_down:
        return (f"{poll.error.what}; still following the file and asking SLURM again "
                f"(at most every {MAX_POLL_INTERVAL_S:g} s) until the job ends")
    if poll.error is None and was_down:
        return f"SLURM answers again: job {poll.record.job_id} is {poll.record.state}"
    return None


def _ask(watcher: JobWatcher, result: FollowResult, said: JobRecord | None,
         note: Callable[[str], None]) -> Poll:
    """One poll through the watcher; say what changed, and when SLURM stops or starts answering."""
    poll = watcher.poll(result.record)
    progress = _progress_note(said, poll.record) if poll.error is None else None
    for text in (_outage_note(poll, result.down), progress):
        if text:
            note(text)
    result.down = poll.error is not None
    result.unanswered += result.down
    result.record = poll.record
    return poll


def _copy_new(follower: Follower, write: Callable[[bytes], None],
              result: FollowResult) -> bool:
    """Write what the job appended since the last read; False if nothing was new."""
    data = follower.read_new()
    if data:
        result.saw_file = True
        write(data)
    return bool(data)


def follow(
    record: JobRecord,
    watcher: JobWatcher,
    write: Callable[[bytes], None],
    note: Callable[[str], None],
    *,
    err: bool = False,
    start_offset: int = 0,
    poll_s: float = FILE_POLL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    follower: Follower | None = None,
    waiter: Pause | None = None,
    closed: Callable[[], bool] | None = None,
) -> FollowResult:
    """Print the log as it grows until the job ends, polling SLURM through the watcher.

    A SLURM that does not answer (controller down or stopped) is said once and asked again
    with back-off; following goes on until SLURM, back, says the job has ended. `waiter`
    (places/filewait.py) wakes the loop when the file is written; without one it sleeps `poll_s`.
    `closed` says when the log's last writer has closed it: SLURM is asked then, not later.
    """
    pause: Callable[[float], object] = waiter.wait if waiter is not None else sleep
    # A login's file is read over ssh (places/loginfiles.py: RemoteFollower, same interface).
    follower = follower or FileFollower(log_path(record, err), start_offset)
    result = FollowResult(record)
    done = watcher.is_final(record)
    said: JobRecord | None = None
    hint = _EndHint(closed) if closed is not None else None
    next_ask = clock()
    while not done:
        now = clock()
        if hint is not None and hint.check(now):
            next_ask = now
        if now >= next_ask:
            poll = _ask(watcher, result, said, note)
            result.slurm_call_times.append(now)
            said = said if poll.error else poll.record
            gap = hint.gap(poll) if hint is not None else None
            wait_s = poll.wait_s if gap is None else min(gap, poll.wait_s)
            done, next_ask = poll.done, now + wait_s
        if not _copy_new(follower, write, result) and not done:
            # Woken by a write (inotify) at once; else after poll_s, or the next SLURM ask.
            pause(max(0.0, min(poll_s, next_ask - clock())))
    _drain(follower, write, result, pause, poll_s, clock, closed)
    result.record = watcher.latest(result.record)
    return result


def _drain(follower: Follower, write: Callable[[bytes], None], result: FollowResult,
           pause: Callable[[float], object], poll_s: float, clock: Callable[[], float],
           closed: Callable[[], bool] | None) -> None:
    """Read what the node wrote last: once where its writer has closed the file, else on
    until the file is quiet (a node may still be flushing it over NFS)."""
    pause(0.0)  # the events already come: a close the loop has not heard yet
    if closed is not None and closed():
        _copy_new(follower, write, result)
        return
    quiet_since = clock()
    while clock() - quiet_since < DRAIN_GRACE_S:
        if _copy_new(follower, write, result):
            quiet_since = clock()
        else:
            pause(poll_s)


def follow_at(place: Place, record: JobRecord, watcher: JobWatcher,
              write: Callable[[bytes], None], note: Callable[[str], None], *, err: bool = False,
              start_offset: int = 0) -> FollowResult:
    """`follow`, the log read where the job ran: through the place's follower, which also
    says how to wait for the file to grow there."""
    reader = place.follower(log_path(record, err), start_offset)
    try:
        return follow(record, watcher, write, note, err=err, follower=reader, waiter=reader,
                      poll_s=reader.poll_s, closed=reader.writer_closed)
    finally:
        reader.close()
