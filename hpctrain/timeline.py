"""A rank's start-up as a timeline of marks, written from inside a job (docs/monitoring.md).

`mark("data ready")` appends one line, `{"t": <unix time>, "mark": "data ready", ...}`, to
`$HPCTRAIN_RUN_DIR/startup/<node>-<rank>.jsonl`; the batch script writes the job's own marks
beside them (`<node>-batch.jsonl`). The first mark of a process also records when the process
started (from the kernel). The packaged trainer marks imports done (with the slowest top-level
packages, from `watch_imports`), process group formed, data ready and first step; a program of
one's own marks what it likes with one line (`from hpctrain.timeline import mark`). Outside an
hpctrain job the marks wait in memory until `attach(run_dir)` names a run directory.

Standard library only, and cheap: it is imported before torch, to time torch's import, and
its names by `status` (hpctrain.progress, which writes, is imported only to write).
"""

from __future__ import annotations

import json
import os
import sys
import time
from _thread import get_ident
from importlib import machinery
from pathlib import Path
from typing import Any

from hpctrain.values.rundir import RunDir

# The batch script's marks (templates/sbatch.sh.j2 spells them), then the trainer's.
JOB_STARTED = "job started"
ENVIRONMENT_ACTIVATED = "environment activated"
RANKS_LAUNCHED = "ranks launched"
PROCESS_STARTED = "process started"
IMPORTS_DONE = "imports done"
WORKER_STARTED = "worker started"  # forked by its node's trainer (trainer/workers.py)
GROUP_FORMED = "process group formed"
DATA_READY = "data ready"
FIRST_STEP = "first step"
BATCH = "batch"  # the batch script's file: <node>-batch.jsonl
SLOWEST = 3  # top-level packages named with "imports done"
_HELD = 64  # marks kept while no run directory is known: a mark in a loop must not grow


def process_age() -> float | None:
    """Seconds since this process started, or None where the kernel does not say."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        # The command name may hold spaces and parentheses: the fields follow the last ')'.
        start_ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    # A time namespace or a container runtime can skew the two clocks; no figure beats a wrong one.
    return age if 0 <= age < 86400 * 365 else None


class _Timeline:
    """This process's marks: where they go, and those written before that was known."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.held: list[dict[str, Any]] = []
        self.pid = -1  # a forked child writes its own process start
        self.made: list[dict[str, Any]] = []  # this process's marks: a forked worker's too

    def add(self, row: dict[str, Any]) -> None:
        self.own_process(row["mark"])
        self.made = [*self.made, row][-_HELD:]
        if self.path is None and (run_dir := os.environ.get("HPCTRAIN_RUN_DIR")):
            self.attach(Path(run_dir))
        if self.path is None:
            self.held = [*self.held, row][-_HELD:]
            return
        self._write([row])

    def attach(self, run_dir: Path) -> None:
        self.path = _record(run_dir)
        held, self.held = self.held, []
        self._write(held)

    def own_process(self, first: str = "") -> None:
        """A new process (the first mark, or a forked child): its start is its first mark."""
        if self.pid == os.getpid():
            return
        self.pid, self.path, self.held, self.made = os.getpid(), None, [], []
        age = process_age()
        if age is not None and first != PROCESS_STARTED:
            self.held = self.made = [self._row(PROCESS_STARTED, time.time() - age, {})]

    def _row(self, name: str, at: float, detail: dict[str, Any]) -> dict[str, Any]:
        from hpctrain import progress

        env = os.environ
        restart = env.get("SLURM_RESTART_COUNT", "")
        return {"t": round(at, 6), "mark": name, "node": progress.node_name(),
                "rank": progress.rank_from_environment(), "pid": os.getpid(),
                "job": env.get("SLURM_JOB_ID") or None,
                "restart": int(restart) if restart.isdigit() else 0, **detail}

    def _write(self, rows: list[dict[str, Any]]) -> None:
        if not rows or self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write("".join(json.dumps(r) + "\n" for r in rows))
        except OSError:
            pass  # a full or vanished file system must not end the training it times


def _record(run_dir: Path) -> Path:
    """This rank's record of marks in `run_dir`."""
    from hpctrain import progress

    name = progress.record_name(progress.node_name(), progress.rank_from_environment())
    return RunDir(run_dir).startup_dir / f"{name}.jsonl"


_timeline = _Timeline()


def mark(name: str, at: float | None = None, **detail: Any) -> None:
    """Record that this rank reached `name` now (or at `at`, a time.time() value). Any name
    will do; `hpctrain status JOB` shows them in order. Costs one small append."""
    _timeline.add(_timeline._row(name, time.time() if at is None else at, detail))


def forked() -> None:
    """In a worker forked by its node's trainer, its rank's variables set: its marks go to its
    own rank's record, which starts with the trainer's (its process start and imports are the
    worker's too), then "worker started"."""
    t = _timeline
    made, parent_path = t.made, t.path
    t.pid, t.path, t.held, t.made = os.getpid(), None, [], []
    from hpctrain import progress

    rank = progress.rank_from_environment()
    t.made = [{**r, "rank": rank, "pid": t.pid} for r in made]
    run_dir = os.environ.get("HPCTRAIN_RUN_DIR")
    # The trainer's marks are in this record already where it is the trainer's own.
    if not (parent_path and run_dir and _record(Path(run_dir)) == parent_path):
        t.held = list(t.made)
    mark(WORKER_STARTED)


def process_start() -> float | None:
    """When this process started (wall time; a forked worker's: its node trainer's), or None
    where the kernel does not say."""
    if _timeline.pid == os.getpid():
        started = [r["t"] for r in _timeline.made if r["mark"] == PROCESS_STARTED]
        if started:
            return float(started[0])
    age = process_age()
    return None if age is None else time.time() - age


def attach(run_dir: Path) -> None:
    """Write this process's marks into `run_dir`, those held so far first, unless a job's run
    directory ($HPCTRAIN_RUN_DIR) takes them: for a run whose directory is known only once it
    starts (`hpctrain train` on this machine)."""
    _timeline.own_process()
    _timeline.attach(Path(os.environ.get("HPCTRAIN_RUN_DIR") or run_dir))


# -- Which packages the imports went to ------------------------------------------------------

_FRESH_LOADERS = (machinery.SourceFileLoader, machinery.SourcelessFileLoader,
                  machinery.ExtensionFileLoader)


class _Frame:
    """A package whose module is being loaded, and the seconds other packages took inside it."""

    __slots__ = ("package", "inner")

    def __init__(self, package: str) -> None:
        self.package, self.inner = package, 0.0


class ImportClock:
    """Seconds each top-level package's modules took to find, load and run, and which package
    first imported it: a meta-path finder that times the others' work.

    A package's time is its own: a package it imports counts for that package, so the times add
    up to the imports' whole. Only the thread that started the clock is timed; modules imported
    by other finders (zip files, custom loaders) count for the package that imported them.
    """

    def __init__(self) -> None:
        self.own: dict[str, float] = {}
        self.via: dict[str, str | None] = {}
        self._stack: list[_Frame] = []
        self._thread = get_ident()
        self._finding = False
        self.running = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        """The spec the other finders give, its loader timed; the finding is timed too."""
        if self._finding or not self.running or get_ident() != self._thread:
            return None
        top = name.partition(".")[0]
        self._finding = True
        start = time.perf_counter()
        try:
            spec = self._others(name, path, target)
        finally:
            self._finding = False
            found = time.perf_counter() - start
            self._charge(top, found, found)
        loader = getattr(spec, "loader", None)
        if type(loader) in _FRESH_LOADERS:
            # A fresh loader per module (FileFinder makes one each time): its methods are its own
            # to wrap, and it stays what it is for anything that checks its type. Only an
            # extension module's creation does work (dlopen): a source module's makes none.
            loader.exec_module = self._timed(top, loader.exec_module)  # type: ignore[union-attr]
            if type(loader) is machinery.ExtensionFileLoader:
                loader.create_module = self._timed(top, loader.create_module)  # type: ignore[method-assign]
        return spec

    def _others(self, name: str, path: Any, target: Any) -> Any:
        for finder in list(sys.meta_path):
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                return spec
        return None

    def _charge(self, top: str, own: float, whole: float) -> None:
        """`own` seconds of `top`'s; `whole` (with the packages it imported) off the package
        whose import it happened in, which must not count them as its own."""
        self.own[top] = self.own.get(top, 0.0) + own
        self.via.setdefault(top, self._stack[-1].package if self._stack else None)
        if self._stack:
            self._stack[-1].inner += whole

    def _timed(self, top: str, call: Any) -> Any:
        def timed(*args: Any) -> Any:
            if not self.running or (self._stack and self._stack[-1].package == top):
                return call(*args)  # a package's own module: already inside its time
            frame = _Frame(top)
            start = time.perf_counter()
            self._stack.append(frame)
            try:
                return call(*args)
            finally:
                self._stack.pop()
                whole = time.perf_counter() - start
                self._charge(top, whole - frame.inner, whole)
        return timed

    def slowest(self, count: int = SLOWEST) -> list[dict[str, Any]]:
        """The `count` packages that took longest: name, seconds and the package that first
        imported it (None: the program itself)."""
        ranked = sorted(self.own.items(), key=lambda kv: -kv[1])[:count]
        return [{"name": name, "s": round(s, 3), "via": self.via.get(name)} for name, s in ranked]


_clock: ImportClock | None = None


def watch_imports() -> None:
    """Start timing imports by top-level package, until `imports_done()` (once a process)."""
    global _clock
    if _clock is None:
        _clock = ImportClock()
        _clock.running = True
        sys.meta_path.insert(0, _clock)


def imports_done() -> None:
    """Mark "imports done" with the slowest packages since `watch_imports()`, and stop timing."""
    clock = _clock
    detail: dict[str, Any] = {}
    if clock is not None and clock.running:
        clock.running = False
        if clock in sys.meta_path:
            sys.meta_path.remove(clock)
        detail["packages"] = clock.slowest()
    mark(IMPORTS_DONE, **detail)
