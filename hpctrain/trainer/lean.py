"""The trainer's lean import of torchmetrics: its optional domains wait until someone uses them.

Why: Lightning imports torchmetrics for its `Metric` and `MetricCollection` classes and reads
its version (`compare_version("torchmetrics", ...)` imports the package), and torchmetrics'
`__init__` imports every domain it ships: `functional.image` imports torchvision (which imports
torch._dynamo and sympy), `functional.text` imports transformers, and the package imports
scipy.signal, wherever they are installed. On a GPU node with that usual environment this was
8.6 s of a 16.6 s start-up (issue 43), paid by every rank at every requeue, for metrics the
packaged trainer never computes.

How, without changing what torchmetrics is for the user's code: `install()` puts a finder first
on sys.meta_path before the trainer imports Lightning. The first `import torchmetrics` then runs
the start of torchmetrics' own `__init__` (version, logger, compatibility patches) except its
scipy.signal block, and then only its `from torchmetrics.metric import ...` and
`from torchmetrics.collections import ...` lines: all that Lightning uses. The first touch of
anything else (a name of the package not bound yet, `dir()`, or the import of a torchmetrics
module not imported yet) first runs the rest of torchmetrics' `__init__`, unchanged and in its
order, so a user's module that uses a domain (or `torchmetrics.Accuracy`) finds the package as a
plain `import torchmetrics` leaves it. Where torchmetrics' `__init__` does not have that shape,
the finder steps aside and the ordinary import runs. HPCTRAIN_LEAN_IMPORTS=0 turns it off.
"""

from __future__ import annotations

import ast
import importlib
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from importlib.abc import Loader
from importlib.machinery import ModuleSpec
from importlib.util import spec_from_file_location
from types import ModuleType
from typing import Any

PACKAGE = "torchmetrics"
# The modules of torchmetrics that Lightning imports it for.
CORE = ("torchmetrics.metric", "torchmetrics.collections")
# Where torchmetrics' own order enters them (see _exec_lean).
ENTRY = "torchmetrics.utilities"
SWITCH = "HPCTRAIN_LEAN_IMPORTS"
# An import in the prelude of these top-level packages is deferred with the domains.
DEFERRED_PACKAGES = frozenset({"scipy"})

_lock = threading.RLock()


def _imports(node: ast.AST) -> set[str]:
    """The modules a statement imports, anywhere inside it (absolute names)."""
    found: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Import):
            found.update(alias.name for alias in sub.names)
        elif isinstance(sub, ast.ImportFrom) and sub.level == 0 and sub.module:
            found.add(sub.module)
    return found


def split_init(tree: ast.Module) -> tuple[list[ast.stmt], list[ast.stmt], list[ast.stmt]] | None:
    """torchmetrics' `__init__` as (prelude, core, rest): `rest` holds everything not run
    first, in its order, core included; None where the file does not have the expected shape."""
    body = tree.body
    first = next((i for i, stmt in enumerate(body)
                  if any(name == PACKAGE or name.startswith(PACKAGE + ".")
                         and name != PACKAGE + ".__about__" for name in _imports(stmt))), None)
    if first is None:
        return None
    prelude = [s for s in body[:first]
               if not any(n.split(".")[0] in DEFERRED_PACKAGES for n in _imports(s))]
    deferred = [s for s in body[:first] if s not in prelude]
    core: list[ast.stmt] = [s for s in body[first:]
                            if isinstance(s, ast.ImportFrom) and s.level == 0 and s.module in CORE]
    if {n for s in core for n in _imports(s)} != set(CORE):
        return None
    return prelude, core, deferred + body[first:]


class _Completion:
    """Runs the rest of torchmetrics' `__init__` in the package, once."""

    def __init__(self, module: ModuleType, rest: list[ast.stmt], origin: str) -> None:
        self.module = module
        self.code = compile(ast.Module(body=rest, type_ignores=[]), origin, "exec")
        self.done = False

    def __call__(self) -> None:
        with _lock:
            if self.done:
                return
            self.done = True
            _FINDER.completion = None
            namespace = self.module.__dict__
            namespace.pop("__getattr__", None)
            namespace.pop("__dir__", None)
            exec(self.code, namespace)  # the rest of torchmetrics' own __init__, unchanged

    def getattr(self, name: str) -> Any:
        """The module's `__getattr__`: a name not bound yet completes the package first."""
        self()
        try:
            return self.module.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}") from None

    def dir(self) -> list[str]:
        self()
        return sorted(self.module.__dict__)


class _LeanLoader:
    """Loads torchmetrics' prelude and core; the real loader answers everything else."""

    def __init__(self, real: Any, origin: str) -> None:
        self._real = real
        self._origin = origin

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def create_module(self, spec: ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        _FINDER.armed = False
        source = self._real.get_source(PACKAGE)
        parts = split_init(ast.parse(source, self._origin)) if source else None
        # The package names its real loader, as a plain import leaves it (importlib.reload).
        module.__loader__ = self._real
        if module.__spec__ is not None:
            module.__spec__.loader = self._real
        initial = dict(module.__dict__)
        if parts is not None:
            try:
                self._exec_lean(module, *parts)
                return
            except Exception:  # the ordinary import below raises what is real
                module.__dict__.clear()
        module.__dict__.update(initial)
        # Not the shape this module knows, or it failed: the ordinary import.
        _FINDER.disarm()
        exec(self._real.get_code(PACKAGE), module.__dict__)

    def _exec_lean(self, module: ModuleType, prelude: list[ast.stmt], core: list[ast.stmt],
                   rest: list[ast.stmt]) -> None:
        completion = _Completion(module, rest, self._origin)
        exec(compile(ast.Module(body=prelude, type_ignores=[]), self._origin, "exec"),
             module.__dict__)  # lines of torchmetrics' own __init__
        # torchmetrics.metric imported first meets the cycle metric -> utilities -> checks ->
        # metric; torchmetrics' own order enters through utilities (its functional does).
        importlib.import_module(ENTRY)
        exec(compile(ast.Module(body=core, type_ignores=[]), self._origin, "exec"),
             module.__dict__)
        module.__dict__["__getattr__"] = completion.getattr
        module.__dict__["__dir__"] = completion.dir
        _FINDER.completion = completion


class _CompleteFirst(Loader):
    """Loads a torchmetrics module not imported yet: the package is completed first (which may
    import this module itself), then the module is imported as usual."""

    def create_module(self, spec: ModuleSpec) -> None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        name = module.__name__
        del sys.modules[name]  # the placeholder; the real module replaces it
        completion = _FINDER.completion
        if completion is not None:
            completion()
        sys.modules[name] = sys.modules.get(name) or importlib.import_module(name)


class _Finder:
    """First on sys.meta_path: torchmetrics the lean way, then the rest of it on first use."""

    def __init__(self) -> None:
        self.armed = False
        self.completion: _Completion | None = None
        self._asking = False

    def disarm(self) -> None:
        self.armed = False
        self.completion = None

    def _real_spec(self, name: str, path: Sequence[str] | None,
                   target: ModuleType | None) -> ModuleSpec | None:
        # A finder that asks the others in turn (the start-up timeline's import clock) must
        # not get this one's answer back: it would wrap a lean loader in another.
        self._asking = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec: ModuleSpec | None = finder.find_spec(name, path, target)
                if spec is not None:
                    return spec
            return None
        finally:
            self._asking = False

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        """torchmetrics' lean spec, or a completing one for its modules; None for the rest."""
        if self._asking:
            return None
        if name == PACKAGE and self.armed and target is None:
            # Only a spec: importlib.util.find_spec (package_available) asks too, and the
            # loader disarms when the import does happen.
            return self._lean_spec(name, path, target)
        if self.completion is not None and name.startswith(PACKAGE + "."):
            real = self._real_spec(name, path, target)
            if real is None:
                return None
            # The real spec's facts, for those who only look (importlib.util.find_spec).
            spec = ModuleSpec(name, _CompleteFirst(), origin=real.origin)
            spec.submodule_search_locations = real.submodule_search_locations
            spec.has_location = real.has_location
            return spec
        return None

    def _lean_spec(self, name: str, path: Sequence[str] | None,
                   target: ModuleType | None) -> ModuleSpec | None:
        real = self._real_spec(name, path, target)
        if (real is None or real.origin is None or real.submodule_search_locations is None
                or not hasattr(real.loader, "get_source")):
            return None
        return spec_from_file_location(
            name, real.origin, loader=_LeanLoader(real.loader, real.origin),
            submodule_search_locations=list(real.submodule_search_locations))


_FINDER = _Finder()


def install(environ: Mapping[str, str] | None = None) -> bool:
    """Make the process's first `import torchmetrics` lean; False where it is off or too late
    (torchmetrics already imported, or HPCTRAIN_LEAN_IMPORTS=0)."""
    env = os.environ if environ is None else environ
    if env.get(SWITCH, "1") == "0" or PACKAGE in sys.modules:
        return False
    with _lock:
        _FINDER.armed = True
        if _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)
    return True


def deferred() -> bool:
    """Whether torchmetrics was imported the lean way and the rest of it is still to come."""
    return _FINDER.completion is not None
