"""The rank hook: what hpctrain does inside every rank of a job, the program unchanged.

Installed at the rank's start (site/sitecustomize.py) where the job has a run directory. It
waits until the program imports torch.distributed, then:

- **registers the rank** once its process group exists: `ranks/<node>-<rank>.json` (pid, rank,
  world) tells the stall watcher whose stack and CPU time to read;
- **turns PyTorch's flight recorder on** (TORCH_FR_BUFFER_SIZE, unless set) and writes its
  record of the rank's collectives when the watcher asks (`stall-evidence/flight-request`): a
  thread looks once a second, since the main thread may sit inside a collective;
- **ends the rank without gloo's teardown race** once the program has ended cleanly: every
  rank meets the others on the process group's store, then the process ends (os._exit) without
  the C++ teardown that aborts ("terminate called without an active exception") when a peer or
  the store's host has gone first. A rank whose program raised, or asked for a non-zero exit
  through sys.exit, exit() or quit(), ends as Python would end it.

Standard library only (torch is the program's, imported by it); never raises into the program.
"""

from __future__ import annotations

import atexit
import builtins
import contextlib
import gc
import io
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

from hpctrain import rundir
from hpctrain.progress import node_name, record_name

C10D = "torch.distributed.distributed_c10d"
FR_BUFFER = "2000"  # collectives the flight recorder keeps (entries of about 1 KB)
LOOK_EVERY_S = 1.0
# How long a rank that has ended waits at its exit for the others to end too. Past it, the
# rank ends anyway (a peer that died is the job's failure, told by `why`, not this wait's).
MEET_TIMEOUT_S = 600.0
_MEET_KEY = "hpctrain/rank-hook/left"


class _State:
    """What the hook has seen of this process: its process group, how its program ended."""

    def __init__(self) -> None:
        self.installed = False
        self.rank: int | None = None
        self.world = 0
        self.raised = False
        self.exit_code: object = None  # the last code given to sys.exit, exit() or quit()
        self.met = False  # every rank met at the process group's destruction


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
        if group is None and c10d.is_initialized():
            _safely(lambda: _meet(c10d))
        return destroy(group)

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
    _write(_run_dir() / rundir.RANKS_DIR / f"{record_name(node, _state.rank)}.json",
           json.dumps(row) + "\n")
    threading.Thread(target=_answer_requests, args=(node, _state.rank), daemon=True,
                     name="hpctrain-flight-recorder").start()


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _answer_requests(node: str, rank: int) -> None:
    """Each new request of the watcher: this rank's flight record, into the evidence."""
    folder = _run_dir() / rundir.STALL_DIR
    request, answered = folder / rundir.FLIGHT_REQUEST, ""
    target = folder / rundir.FLIGHT_DIR / f"{record_name(node, rank)}.json"
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
    """torch's flight recorder, every entry it holds (None: this torch has none)."""
    c10d = sys.modules.get("torch._C._distributed_c10d")
    dump = getattr(c10d, "_dump_fr_trace_json", None)
    if dump is None:
        return None
    data = json.loads(dump(True, False))
    return data if isinstance(data, dict) else None


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


def _meet(c10d: ModuleType) -> None:
    """Every rank has ended its work: wait (bounded) until all have come here."""
    if _state.met or not _state.world:
        return
    store = c10d._get_default_store()
    arrived = store.add(_MEET_KEY, 1)
    deadline = time.monotonic() + MEET_TIMEOUT_S
    while arrived < _state.world and time.monotonic() < deadline:
        time.sleep(0.05)
        arrived = store.add(_MEET_KEY, 0)
    _state.met = arrived >= _state.world


def ended_cleanly() -> bool:
    """No uncaught exception and no exit code but 0 asked for. A non-zero code given to
    sys.exit may have been caught and the program gone on to end well: Python then ends it
    with 0, which the hook cannot tell from an exit with that code, so it ends those as Python
    would (the teardown race stays possible there)."""
    return not _state.raised and _state.exit_code in (None, 0)


def _at_exit() -> None:
    """After a clean end of a rank of a process group: meet the others, then end at once,
    without the teardown that races."""
    c10d = sys.modules.get(C10D)
    if c10d is None or _state.rank is None or not ended_cleanly():
        return
    try:
        if c10d.is_initialized():
            _meet(c10d)
    except Exception:  # noqa: BLE001, S110 - the store's host has gone: nobody is left to meet
        pass
    _flush_files()
    os._exit(0)


_FILES = (io.BufferedWriter, io.BufferedRandom, io.TextIOWrapper)


def _flush_files() -> None:
    """What Python's own shutdown would write: every open file's buffer (os._exit skips it)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    for obj in gc.get_objects():
        # type(), not isinstance: that would read __class__ of every object, which some
        # objects answer with a warning (torch.distributed.reduce_op).
        if issubclass(type(obj), _FILES):
            try:
                if not obj.closed:
                    obj.flush()
            except (OSError, ValueError):
                pass
