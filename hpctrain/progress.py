"""A rank's progress, reported from inside a job for the stall watcher (docs/long-runs.md).

`report(step)` records the rank's step and when it got there in
`$HPCTRAIN_RUN_DIR/rank-progress/<node>-<rank>.json`. The packaged trainer calls it after every
batch; a program of one's own calls it in its loop (`from hpctrain.progress import report`).
Outside an hpctrain job it does nothing. It writes at most once a second, so a step of a few
milliseconds costs a clock read. The first call also arranges that SIGQUIT dumps every
thread's stack beside the record (the watcher's way in where py-spy cannot attach).

`log_metrics(epoch, loss=..., val_acc=...)` records an epoch's metrics in the run's
`metrics.json`, in the trainer's format (docs/sweeps.md, "Sweeping your own script"), so that
`sweep-report` ranks a sweep of one's own script and `why` reads its epochs; only rank 0 writes.

Standard library only: it is imported inside jobs, by the trainer and by users' programs.
"""

from __future__ import annotations

import faulthandler
import json
import math
import os
import re
import signal
import socket
import threading
import time
from pathlib import Path
from typing import IO, Any

from hpctrain.values.rundir import RunDir

WRITE_EVERY_S = 1.0
STACK_SIGNAL = signal.SIGQUIT
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def node_name() -> str:
    """SLURM's name for this node (several dev-cluster nodes share one host name)."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname() or "node"


def rank_from_environment() -> int:
    """The global rank: RANK (srun's wrapper, torchrun), else NODE_RANK and LOCAL_RANK (the
    per-node launcher's workers, Lightning's local processes, which share one SLURM_PROCID
    and so would share one record), else SLURM_PROCID, else 0."""
    env = os.environ
    if env.get("RANK", "").isdigit():
        return int(env["RANK"])
    local, node = env.get("LOCAL_RANK", ""), env.get("NODE_RANK", "")
    if local.isdigit() or node.isdigit():
        width = env.get("LOCAL_WORLD_SIZE", "")
        per_node = int(width) if width.isdigit() else 1
        return (int(node) if node.isdigit() else 0) * per_node + (int(local) if local.isdigit()
                                                                  else 0)
    procid = env.get("SLURM_PROCID", "")
    return int(procid) if procid.isdigit() else 0


def safe_name(node: str) -> str:
    """A node name made safe as a file name."""
    return _UNSAFE.sub("_", node).strip("._") or "node"


def record_name(node: str, rank: int) -> str:
    """`<node>-<rank>`: the file name of a rank's record (without its suffix)."""
    return f"{safe_name(node)}-{rank}"


class Reporter:
    """One rank's record: its step, the time of its last report and the seconds a step takes."""

    def __init__(self, directory: Path, node: str, rank: int) -> None:
        self.path = directory / f"{record_name(node, rank)}.json"
        self.node, self.rank = node, rank
        self._written_at = 0.0
        self._last: tuple[int, float] | None = None
        self._step_s: float | None = None
        self._stack_file: IO[str] | None = None
        # The report not written yet (the throttle), and the lock of the two writers: a rank
        # whose steps take milliseconds and that then hangs must not leave its first record
        # as its last (a thread writes what is pending a second later).
        self._pending: tuple[int, float] | None = None
        self._lock = threading.Lock()
        self._flusher: threading.Thread | None = None

    def report(self, step: int, now: float | None = None) -> None:
        """The rank is at `step` now; written when a second has passed since the last write,
        else a second later by the flushing thread."""
        now = time.time() if now is None else now
        if self._last is not None and step > self._last[0]:
            per_step = (now - self._last[1]) / (step - self._last[0])
            # A moving mean: one slow step (a checkpoint) does not widen the window alone.
            self._step_s = per_step if self._step_s is None else 0.8 * self._step_s + 0.2 * per_step
        if self._last is None or step != self._last[0]:
            self._last = (step, now)
        if self._stack_file is None:
            self._arm_stack_dump()
        if now - self._written_at >= WRITE_EVERY_S:
            self._pending = None
            self._write(step, now)
        else:
            self._pending = (step, now)
            if self._flusher is None:
                self._flusher = threading.Thread(target=self._flush, daemon=True,
                                                 name="hpctrain-progress")
                self._flusher.start()

    def _flush(self) -> None:
        while True:
            time.sleep(WRITE_EVERY_S)
            pending, self._pending = self._pending, None
            if pending is not None:
                self._write(*pending)

    def _row(self, step: int, now: float) -> dict[str, Any]:
        return {"node": self.node, "rank": self.rank, "pid": os.getpid(), "step": step,
                "t": round(now, 3),
                "step_s": None if self._step_s is None else round(self._step_s, 4)}

    def _write(self, step: int, now: float) -> None:
        with self._lock:
            # The flusher's pending report may be older than one written since.
            if now >= self._written_at:
                self._write_unlocked(step, now)

    def _write_unlocked(self, step: int, now: float) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self._row(step, now)) + "\n", encoding="utf-8")
            os.replace(tmp, self.path)
            self._written_at = now
        except OSError:
            # A full or vanished file system must not end the training it watches.
            self._written_at = now

    def _arm_stack_dump(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._stack_file = open(self.path.with_suffix(".stack"), "a", encoding="utf-8")  # noqa: SIM115
            faulthandler.register(STACK_SIGNAL, file=self._stack_file, all_threads=True)
        except (OSError, ValueError, RuntimeError):
            # Not the main interpreter, or no file: py-spy remains the watcher's way.
            self._stack_file = open(os.devnull, "w")  # noqa: SIM115


_reporter: Reporter | None = None
_disabled = False


def report(step: int) -> None:
    """Tell the stall watcher this rank reached `step` (any increasing count; a repeated
    value says the rank is alive, as during validation). A no-op outside an hpctrain job."""
    global _reporter, _disabled
    if _reporter is None:
        if _disabled:
            return
        run_dir = os.environ.get("HPCTRAIN_RUN_DIR")
        if not run_dir:
            _disabled = True
            return
        _reporter = Reporter(RunDir(run_dir).progress_dir, node_name(),
                             rank_from_environment())
    _reporter.report(step)


# Marks a metrics.json this module wrote (a resumed run carries its epochs on; the trainer's
# own file is never touched).
WRITER = "hpctrain.progress"
_STARTED = time.time()


class MetricsLog:
    """Rank 0's metrics.json: every epoch's metrics and time, rewritten whole at each call."""

    def __init__(self, path: Path, now: float) -> None:
        self.path = path
        self.epochs: dict[int, dict[str, Any]] = {}
        self.before_s = 0.0
        self._started = self._last = now
        self._load()

    def _load(self) -> None:
        """The epochs an earlier attempt of this run wrote (a requeued job goes on from them)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if not isinstance(data, dict) or data.get("written_by") != WRITER:
            return
        for epoch in data.get("epochs") or []:
            if isinstance(epoch, dict) and isinstance(epoch.get("epoch"), int):
                self.epochs[epoch["epoch"]] = epoch
        wall = data.get("wall_time_s")
        self.before_s = float(wall) if isinstance(wall, int | float) else 0.0

    def log(self, epoch: int, max_epochs: int | None, values: dict[str, float | None],
            now: float) -> None:
        """An epoch's metrics (merged with what it logged already); later epochs dropped, as a
        run that went back to an earlier checkpoint will log them again."""
        self.epochs = {e: r for e, r in self.epochs.items() if e <= epoch}
        record = self.epochs.setdefault(epoch, {"epoch": epoch, "metrics": {}, "time_s": 0.0})
        record["metrics"].update(values)
        record["time_s"] = round(record["time_s"] + now - self._last, 3)
        self._last = now
        self._write(max_epochs, now)

    def _file(self, max_epochs: int | None, now: float) -> dict[str, Any]:
        epochs = [self.epochs[e] for e in sorted(self.epochs)]
        latest: dict[str, float | None] = {}
        for record in epochs:
            latest.update(record["metrics"])
        done = len(epochs)
        return {"schema_version": 1, "written_by": WRITER,
                "status": "completed" if max_epochs and done >= max_epochs else "running",
                "epochs_completed": done, "max_epochs": max_epochs,
                "slurm_job_id": os.environ.get("SLURM_JOB_ID"), "run_dir": str(self.path.parent),
                "wall_time_s": round(self.before_s + now - self._started, 3),
                "logged_metrics": list(latest),
                **{f"final_{name}": value for name, value in latest.items()},
                "epochs": epochs}

    def _write(self, max_epochs: int | None, now: float) -> None:
        try:
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self._file(max_epochs, now), indent=1) + "\n",
                           encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError:
            # A full or vanished file system must not end the training it records.
            pass


_metrics: MetricsLog | None = None
_metrics_off = False


def _number(name: str, value: Any) -> float | None:
    """A metric's value as JSON holds it: a float (a tensor's too), None for NaN or infinity."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"log_metrics: {name}={value!r} is not a number") from None
    return number if math.isfinite(number) else None


def log_metrics(epoch: int, max_epochs: int | None = None, **metrics: Any) -> None:
    """Record epoch `epoch`'s metrics (`loss=0.12, val_acc=0.9`: numbers, or 0-d tensors) in
    `$HPCTRAIN_RUN_DIR/metrics.json`, which `sweep-report` ranks by; `max_epochs` lets `why`
    say how far the run got. Rank 0 writes; a no-op on other ranks and outside a job."""
    global _metrics, _metrics_off
    if _metrics is None:
        run_dir = os.environ.get("HPCTRAIN_RUN_DIR")
        if _metrics_off or not run_dir or rank_from_environment() != 0:
            _metrics_off = True
            return
        # The first epoch's time counts from the import (its start-up included).
        _metrics = MetricsLog(RunDir(run_dir).metrics, _STARTED)
    values = {name: _number(name, value) for name, value in metrics.items()}
    _metrics.log(epoch, max_epochs, values, time.time())
