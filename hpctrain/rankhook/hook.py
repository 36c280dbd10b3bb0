"""The rank hook: what hpctrain does inside every rank of a job, the program unchanged.

Installed at the rank's start (site/sitecustomize.py) where the job has a run directory. It
waits until the program imports torch.distributed, then:

- **registers the rank** once its process group exists: `rank-registry/<node>-<rank>.json`
  (pid, rank, world) tells the stall watcher whose stack and CPU time to read;
- **turns PyTorch's flight recorder on** (TORCH_FR_BUFFER_SIZE, unless set) and writes its
  record of the rank's collectives when the watcher asks (`stall-evidence/flight-request`): a
  thread looks once a second, since the main thread may sit inside a collective;
- **ends the ranks without gloo's teardown race**: a rank whose program ended (it destroys its
  process group, or it reaches its exit with the group still there and no error seen) meets
  the others on the group's store before the group is torn down and again after, so that no
  rank tears down or ends while another still talks to it, the store's host last; and every
  rank ends, with the exit code Python chose, without the C++ teardown of torch's libraries
  (glibc's on_exit calls _exit), where an abort "terminate called without an active
  exception" comes from when a peer has gone first.

Standard library only (torch is the program's, imported by it); never raises into the program.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from pathlib import Path
from types import ModuleType
from typing import Any

from hpctrain.progress import node_name, record_name
from hpctrain.values.rundir import RunDir

C10D = "torch.distributed.distributed_c10d"
FR_BUFFER = "2000"  # collectives the flight recorder keeps (entries of about 1 KB)
LOOK_EVERY_S = 1.0
# How long a rank that has ended its work waits for the others to end theirs. Past it, the
# rank goes on (a peer that died is the job's failure, told by `why`, not this wait's).
MEET_TIMEOUT_S = 600.0
# How long the store's host waits for the others to have seen that all met (then it leaves).
SEEN_TIMEOUT_S = 30.0
_MEET_KEY = "hpctrain/rank-hook/meet"


class _State:
    """What the hook has seen of this process: its process group, how its program ended."""

    def __init__(self) -> None:
        self.installed = False
        self.rank: int | None = None
        self.world = 0
        self.raised = False
        self.exit_code: object = None  # the last code given to sys.exit, exit() or quit()
        self.generation = 0  # the process groups destroyed so far: their meetings' keys
        self.destroy: Callable[..., Any] | None = None  # torch's own destroy_process_group


_state = _State()


def install() -> None:
    """Watch for torch.distributed, record how the program ends, and end it cleanly."""
    if _state.installed:
        return
    _state.installed = True
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", FR_BUFFER)
    sys.meta_path.insert(0, _AfterImport(C10D, _patch))
    _record_exits()
    # Registered first, so it runs last: after the program's own atexit functions.
    atexit.register(_at_exit)


class _AfterImport(MetaPathFinder):
    """Calls `then(module)` right after the module `name` has been executed."""

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> ModuleSpec | None:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Then(spec.loader, self.then)
        return spec


class _Then(Loader):
    """A loader that runs `then` on the module it has executed."""

    def __init__(self, loader: Loader, then: Callable[[ModuleType], None]) -> None:
        self.loader, self.then = loader, then

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        # The program runs on without the hook, whatever went wrong in it.
        with contextlib.suppress(Exception):
            self.then(module)


def _patch(c10d: ModuleType) -> None:
    """Wrap init_process_group and destroy_process_group (torch.distributed's `import *`
    copies them after this runs)."""
    init, destroy = c10d.init_process_group, c10d.destroy_process_group
    torch = sys.modules.get("torch")
    if tuple(int(x) for x in str(getattr(torch, "__version__", "9.9")).split(".")[:2]
             if x.isdigit()) < (2, 6):
        # The NCCL flight recorder's older name (read when the process group is made).
        os.environ.setdefault("TORCH_NCCL_TRACE_BUFFER_SIZE", FR_BUFFER)

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        done = init(*args, **kwargs)
        _safely(lambda: _started(c10d))
        return done

    def destroy_process_group(group: Any = None) -> Any:
        if group is not None or not c10d.is_initialized():
            return destroy(group)
        return _leave_together(c10d, destroy)

    _state.destroy = destroy

    for new, old in ((init_process_group, init), (destroy_process_group, destroy)):
        new.__wrapped__ = old  # type: ignore[attr-defined]
        new.__doc__, new.__name__ = old.__doc__, old.__name__
        setattr(c10d, old.__name__, new)


def _safely(action: Callable[[], object]) -> None:
    try:
        action()
    except Exception as e:  # noqa: BLE001 - never into the program
        print(f"hpctrain rank hook: {e!r}", file=sys.stderr)


def _run_dir() -> Path:
    return Path(os.environ["HPCTRAIN_RUN_DIR"])


def _started(c10d: ModuleType) -> None:
    """The process group exists: register the rank, and answer the watcher's requests."""
    _state.rank, _state.world = c10d.get_rank(), c10d.get_world_size()
    node = node_name()
    row = {"node": node, "rank": _state.rank, "world": _state.world, "pid": os.getpid(),
           "t": round(time.time(), 3), "backend": str(c10d.get_backend())}
    _write(RunDir(_run_dir()).ranks_dir / f"{record_name(node, _state.rank)}.json",
           json.dumps(row) + "\n")
    threading.Thread(target=_answer_requests, args=(node, _state.rank), daemon=True,
                     name="hpctrain-flight-recorder").start()
    _skip_native_teardown()


def _skip_native_teardown() -> None:
    """At the process's end, after Python's own, _exit with its status before the C++ static
    destructors of torch's libraries run (they were registered earlier, so run later)."""
    import ctypes

    libc = ctypes.CDLL(None)
    on_exit, end = getattr(libc, "on_exit", None), getattr(libc, "_exit", None)
    if on_exit is None or end is None:  # not glibc: the teardown runs as it would
        return
    on_exit.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    # on_exit calls end(status, NULL): _exit reads its one argument, the status.
    on_exit(ctypes.cast(end, ctypes.c_void_p), None)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _answer_requests(node: str, rank: int) -> None:
    """Each new request of the watcher: this rank's flight record, into the evidence."""
    where = RunDir(_run_dir())
    request, answered = where.flight_request, ""
    target = where.flight_dir / f"{record_name(node, rank)}.json"
    while True:
        time.sleep(LOOK_EVERY_S)
        try:
            asked = request.read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if asked and asked != answered:
            answered = asked
            row = {"request": asked, "node": node, "rank": rank, "pid": os.getpid()}
            _safely(lambda row=row: _write(target, json.dumps(  # type: ignore[misc]
                {**row, "t": round(time.time(), 3), "trace": flight_record()}) + "\n"))


def flight_record() -> dict[str, Any] | None:
    """torch's flight recorders, every entry they hold (None: this torch has none). Gloo's
    collectives are in the one `_dump_fr_trace_json` reads; a CUDA build keeps NCCL's in
    another (`_dump_nccl_trace_json`), so both are read and their entries put together."""
    c10d = sys.modules.get("torch._C._distributed_c10d")
    found: dict[str, Any] | None = None
    for name in ("_dump_fr_trace_json", "_dump_nccl_trace_json"):
        dump = getattr(c10d, name, None)
        if dump is None:
            continue
        try:
            data = json.loads(dump(True, False))
        except (RuntimeError, ValueError):  # a recorder this process never used
            continue
        if not isinstance(data, dict):
            continue
        if found is None:
            found = data
        else:
            found["entries"] = (found.get("entries") or []) + (data.get("entries") or [])
    return found


def _record_exits() -> None:
    """Remember an uncaught exception and every exit code the program asks for."""
    hook = sys.excepthook

    def excepthook(kind: Any, value: Any, tb: Any) -> None:
        _state.raised = True
        hook(kind, value, tb)

    sys.excepthook = excepthook
    sys.exit = _recording(sys.exit)
    for name in ("exit", "quit"):
        if callable(getattr(builtins, name, None)):
            setattr(builtins, name, _recording(getattr(builtins, name)))


def _recording(exit_: Callable[..., Any]) -> Callable[..., Any]:
    def recorded(code: object = None) -> Any:
        _state.exit_code = code
        return exit_(code)

    return recorded


def _leave_together(c10d: ModuleType, destroy: Callable[..., Any]) -> Any:
    """Meet the others, destroy the default process group, meet again (on its store, kept)."""
    store = c10d._get_default_store()
    _state.generation += 1
    _safely(lambda: _meet(store, f"{_state.generation}/arrived", MEET_TIMEOUT_S))
    done = destroy()
    _safely(lambda: _meet(store, f"{_state.generation}/destroyed", SEEN_TIMEOUT_S))
    return done


def _meet(store: Any, phase: str, timeout_s: float) -> None:
    """Wait (bounded) until every rank has come to `phase`; rank 0, the store's host under
    srun, leaves last: once the others have seen that all came."""
    key, world = f"{_MEET_KEY}/{phase}", _state.world
    arrived, deadline = store.add(key, 1), time.monotonic() + timeout_s
    while arrived < world and time.monotonic() < deadline:
        time.sleep(0.05)
        arrived = store.add(key, 0)
    if _state.rank != 0:
        store.add(f"{key}/seen", 1)
        return
    deadline = time.monotonic() + SEEN_TIMEOUT_S
    while store.add(f"{key}/seen", 0) < world - 1 and time.monotonic() < deadline:
        time.sleep(0.05)


def ended_cleanly() -> bool:
    """No uncaught exception (seen by the hook's excepthook, or by Python's sys.last_value,
    set before any excepthook a program installed) and no exit code but 0 asked for."""
    failed = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    return not _state.raised and failed is None and _state.exit_code in (None, 0)


def _at_exit() -> None:
    """A rank that reaches its end with its process group still there and no error seen
    leaves it together with the others. A bare `raise SystemExit(N)` is not seen: such a rank
    meets the others too, and ends with N all the same."""
    c10d = sys.modules.get(C10D)
    if c10d is None or _state.rank is None or _state.destroy is None:
        return
    if ended_cleanly() and c10d.is_initialized():
        _safely(lambda: _leave_together(c10d, _state.destroy))  # type: ignore[arg-type]
