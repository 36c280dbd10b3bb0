"""Read a job's log, and follow it while the job runs (asking SLURM at most every 5 s)."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hpctrain.errors import HpctrainError
from hpctrain.history import History, JobRecord, StateUpdate
from hpctrain.jobs.tracking import merge
from hpctrain.slurm.client import AccountingUnavailableError, SlurmClient
from hpctrain.slurm.states import JobState, parse_state

SLURM_INTERVAL_S = 5.0
FILE_POLL_S = 0.25
# After the job ends the node may still be flushing the file (NFS attribute caches on real
# clusters): read on for this long once nothing new arrives.
DRAIN_GRACE_S = 1.0
_CHUNK = 1 << 16


def log_path(record: JobRecord, err: bool = False) -> Path:
    """The job's stdout (or stderr) file as recorded at submit."""
    path = record.stderr_path if err else record.stdout_path
    if not path:
        raise HpctrainError(
            f"job {record.job_id} has no recorded {'stderr' if err else 'output'} file",
            "it was recorded without one; look in its run directory " + (record.run_dir or ""),
        )
    return Path(path)


def pick(history: History, job_id: str | None) -> JobRecord:
    """The job with this id (the newest if several clusters used it), or the last submitted."""
    if job_id is None:
        last = history.last()
        if last is None:
            raise HpctrainError(
                "no job has been submitted yet", "submit one with `hpctrain submit --profile ...`"
            )
        return last
    found = history.by_job_ids([job_id])
    if not found:
        raise HpctrainError(
            f"job {job_id} is not in the history ({history.path})",
            "hpctrain tracks only jobs it submitted; `hpctrain status --all` lists them",
        )
    return found[-1]


def tail_bytes(path: Path, lines: int) -> tuple[bytes, int]:
    """The last `lines` lines of a file and the file's size (where following starts)."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        if lines <= 0:
            return b"", size
        pos, data = size, b""
        # Read backwards in blocks until enough newlines (one more: the last may end the file).
        while pos > 0 and data.count(b"\n") <= lines:
            step = min(_CHUNK, pos)
            pos -= step
            fh.seek(pos)
            data = fh.read(step) + data
        kept = data.splitlines(keepends=True)[-lines:]
        return b"".join(kept), size


@dataclass
class FileFollower:
    """Reads only the bytes appended since the last read; copes with a missing or truncated file."""

    path: Path
    offset: int = 0

    def read_new(self) -> bytes:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                if size < self.offset:
                    # Truncated or replaced (a requeued job starts its log afresh).
                    self.offset = 0
                if size == self.offset:
                    return b""
                fh.seek(self.offset)
                data = fh.read(size - self.offset)
        except FileNotFoundError:
            return b""
        self.offset += len(data)
        return data


@dataclass
class FollowResult:
    record: JobRecord
    slurm_call_times: list[float] = field(default_factory=list)
    saw_file: bool = False


class _Poller:
    """One SLURM call per poll: squeue while the controller shows the job, then sacct (or
    scontrol without accounting) once for the end state and exit code."""

    # sacct answers that lag behind squeue's "finished" before giving up (x the interval).
    MAX_LAGGING = 6

    def __init__(self, record: JobRecord, client: SlurmClient, history: History) -> None:
        self.record = record
        self.client = client
        self.history = history
        self.source = "squeue"
        self.lagging = 0
        self.done = record.terminal

    def poll(self) -> None:
        if self.source == "squeue":
            self._squeue()
        elif self.source == "sacct":
            self._sacct()
        else:
            self._scontrol()

    def _store(self, update: StateUpdate) -> None:
        self.history.update([update])
        fresh = self.history.by_row_ids([self.record.id])
        if fresh:
            self.record = fresh[0]

    def _squeue(self) -> None:
        live = self.client.squeue([self.record.job_id]).get(self.record.job_id)
        if live is None:
            self.source = "sacct"
            return
        if not live.state.is_terminal or live.state is JobState.COMPLETED:
            self._store(merge(self.record, live, None, accounting_ok=True))
            self.done = live.state.is_terminal
            return
        # Ended otherwise: show the state now, keep the row open for the exit code.
        update = merge(self.record, live, None, accounting_ok=True)
        self._store(dataclasses.replace(update, terminal=False))
        self.source = "sacct"

    def _sacct(self) -> None:
        try:
            acct = self.client.sacct([self.record.job_id]).get(self.record.job_id)
        except AccountingUnavailableError:
            self.source = "scontrol"
            return
        if acct is not None and acct.state.is_terminal:
            self._store(merge(self.record, None, acct, accounting_ok=True))
            self.done = True
        elif acct is not None and acct.state is not parse_state(self.record.state) \
                and not parse_state(self.record.state).is_terminal:
            # Requeued, or slurmdbd saw it before the controller's purge: back to squeue.
            self._store(merge(self.record, None, acct, accounting_ok=True))
            self.source = "squeue"
        else:
            # slurmdbd has not caught up with the controller yet; ask again in a while, less
            # patiently for a job it has never heard of.
            self.lagging += 1
            if self.lagging >= (self.MAX_LAGGING if acct is not None else 2):
                self._give_up()

    def _scontrol(self) -> None:
        info = self.client.scontrol_job(self.record.job_id)
        if info is not None and info.state.is_terminal:
            self._store(merge(self.record, None, info, accounting_ok=False))
            self.done = True
        elif info is not None:
            self._store(merge(self.record, info, None, accounting_ok=False))
            self.source = "squeue"
        else:
            self._give_up()

    def _give_up(self) -> None:
        """Nobody can say more: end with the last state seen (final if it was a final one)."""
        state = parse_state(self.record.state)
        self._store(
            StateUpdate(
                id=self.record.id, state=self.record.state, terminal=state.is_terminal,
                stale=not state.is_terminal, slurm_state=self.record.slurm_state,
                exit_code=self.record.exit_code, signal=self.record.signal,
                reason=self.record.reason, node_list=self.record.node_list,
                elapsed_s=self.record.elapsed_s, time_limit_s=self.record.time_limit_s,
            )
        )
        self.done = True


def follow(
    record: JobRecord,
    client: SlurmClient,
    history: History,
    write: Callable[[bytes], None],
    note: Callable[[str], None],
    *,
    err: bool = False,
    start_offset: int = 0,
    slurm_interval_s: float = SLURM_INTERVAL_S,
    poll_s: float = FILE_POLL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> FollowResult:
    """Print the log as it grows until the job ends; one SLURM call per `slurm_interval_s`."""
    follower = FileFollower(log_path(record, err), start_offset)
    result = FollowResult(record)
    poller = _Poller(record, client, history)
    next_ask = clock()
    said: tuple[str, str | None] | None = None
    while not poller.done:
        now = clock()
        if now >= next_ask:
            poller.poll()
            result.slurm_call_times.append(now)
            next_ask = now + slurm_interval_s
            current = poller.record
            shown = (current.state, current.reason)
            if current.state == JobState.PENDING.value and shown != said:
                note(f"job {current.job_id} is PENDING ({current.reason or 'not scheduled yet'})")
            elif said and said[0] == JobState.PENDING.value and current.state != said[0]:
                note(f"job {current.job_id} is {current.state}")
            said = shown
        data = follower.read_new()
        if data:
            result.saw_file = True
            write(data)
        elif not poller.done:
            sleep(poll_s)
    # Drain what the node wrote last.
    quiet_since = clock()
    while clock() - quiet_since < DRAIN_GRACE_S:
        data = follower.read_new()
        if data:
            result.saw_file = True
            write(data)
            quiet_since = clock()
        else:
            sleep(poll_s)
    result.record = poller.record
    return result


def final_line(record: JobRecord) -> str:
    """`job 12 COMPLETED (exit 0)`: how `logs -f` reports the end."""
    state = parse_state(record.state)
    text = f"job {record.job_id} {state.value}{'?' if record.stale else ''}"
    if record.exit_code is not None and state is not JobState.COMPLETED:
        text += f" (exit code {record.exit_code}"
        text += f", signal {record.signal})" if record.signal else ")"
    elif state is JobState.PENDING and record.reason:
        text += f" ({record.reason})"
    return text
