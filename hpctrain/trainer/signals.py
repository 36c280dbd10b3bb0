"""Stop requests: the workers' signal flags, the batch script's stop file, the run's markers.

The protocol is in docs/trainer.md ("Safe stop and requeue"): a signal handler only notes that a
stop was asked for; the training loop acts on it at a step boundary every rank agrees on.
This module imports neither torch nor Lightning.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from hpctrain.errors import HpctrainError
from hpctrain.values.rundir import RunDir

# EX_TEMPFAIL from sysexits.h: "try again later", what a job that should requeue reports.
EXIT_REQUEUE = 75

STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)

# Why a stop was asked for, as a number the ranks can all-reduce with MAX: the most urgent wins.
NO_REQUEST, BY_FILE, BY_USR1, BY_TERM = 0, 1, 2, 3
_BY_SIGNAL: dict[int, int] = {signal.SIGUSR1: BY_USR1, signal.SIGTERM: BY_TERM}
REASONS = {BY_FILE: "stop file", BY_USR1: "SIGUSR1", BY_TERM: "SIGTERM"}


class TrainingStopped(HpctrainError):
    """Training stopped on a stop request, with its checkpoint on disk."""

    def __init__(self, what: str, exit_code: int) -> None:
        super().__init__(what, "run the same command again (or requeue the job) to continue")
        self.exit_code = exit_code


class StopSignals:
    """While active, SIGUSR1 and SIGTERM only raise a flag; the old handlers come back after."""

    def __init__(self) -> None:
        self.reason = NO_REQUEST
        self.time: float | None = None
        self.started = time.time()
        self._previous: dict[signal.Signals, Any] = {}

    def _note(self, signum: int, frame: FrameType | None) -> None:
        # Runs between any two bytecodes of the training loop, even inside a collective: plain
        # assignments only, nothing that raises, blocks or does I/O.
        self.reason = max(self.reason, _BY_SIGNAL.get(signum, BY_TERM))
        if self.time is None:
            self.time = time.time()

    def __enter__(self) -> StopSignals:
        # Python delivers signals to the main thread only; elsewhere the defaults stay.
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._note)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        self._previous = {}


def segment_start(env: Mapping[str, str], fallback: float) -> float:
    """When this job segment began: a stop file written before then is left from an earlier one."""
    for name in ("HPCTRAIN_SEGMENT_START", "SLURM_JOB_START_TIME"):
        try:
            return float(env[name])
        except (KeyError, ValueError):
            continue
    return fallback


def read_stop_file(path: Path, since: float) -> tuple[str, float] | None:
    """The (signal name, time) of a stop request written at or after `since`, else None."""
    try:
        fields = path.read_text(encoding="utf-8", errors="replace").split()
        when = float(fields[1]) if len(fields) > 1 else path.stat().st_mtime
    except (OSError, ValueError):
        return None
    if when < since:
        return None
    return (fields[0] if fields else "stop file"), when


def clear_stale_markers(run_dir: Path, since: float) -> None:
    """Remove what an earlier segment left: its stop request, stop record and completion mark,
    and the half-written files of a process killed in a write (a checkpoint's as large as it)."""
    from hpctrain.trainer.callbacks import clear_torn_writes

    where = RunDir(run_dir)
    if read_stop_file(where.stop_requested, since) is None:
        where.stop_requested.unlink(missing_ok=True)
    where.stop_saved.unlink(missing_ok=True)
    where.training_complete.unlink(missing_ok=True)
    clear_torn_writes(run_dir, frozenset(p.name for p in (
        where.last_ckpt, where.best_ckpt, where.metrics, where.config, where.imports,
        where.stop_saved, where.training_complete)))


def stop_exit_code(launch: str, global_rank: int) -> int:
    """EXIT_REQUEUE, except for the processes Lightning itself started for a local run."""
    # Lightning's process observer SIGKILLs the main process when one of its child processes
    # exits non-zero; those children end with 0 so that the main process reports 75 itself.
    return 0 if launch == "local" and global_rank != 0 else EXIT_REQUEUE

