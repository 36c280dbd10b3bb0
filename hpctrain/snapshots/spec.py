"""What submit freezes for a job, and freezing it on this machine (freeze.py does the work)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from hpctrain.errors import HpctrainError
from hpctrain.snapshots.freeze import existing_snapshot, freeze
from hpctrain.snapshots.index import git_view
from hpctrain.snapshots.listing import check_project
from hpctrain.snapshots.model import Listing, Snapshot, SnapshotError
from hpctrain.snapshots.workdir import link_code
from hpctrain.startup import ahead
from hpctrain.values.rundir import RunDir

# The store beside the run directories, on the file system every job writes to.
STORE_DIR = ".snapshots"
# The modules a login runs (standard library only besides each other), each after those it
# imports.
SCRIPT_MODULES = ("model", "objects", "index", "listing", "freeze", "workdir", "gc", "script")
_BOOT = """import sys, types
for name in ("hpctrain", "hpctrain.snapshots"):
    sys.modules[name] = types.ModuleType(name)
    sys.modules[name].__path__ = []
for name, source in MODULES:
    module = sys.modules[name] = types.ModuleType(name)
    parent, _, leaf = name.rpartition(".")
    setattr(sys.modules[parent], leaf, module)
    exec(compile(source, name.replace(".", "/") + ".py", "exec"), module.__dict__)
sys.exit(sys.modules["hpctrain.snapshots.script"].main(sys.argv[1:]))
"""


@dataclass(frozen=True)
class CodeSpec:
    """A job's code: the project to freeze, the store, and the job's working directory."""

    project: Path
    store: Path
    code_dir: Path
    # Project-relative paths never frozen (the runs folder) or linked live (data).
    keep_out: tuple[str, ...] = ()
    in_place: tuple[str, ...] = ()
    # The files as this submit's check listed them; its freeze takes them (None: list again).
    listing: Listing | None = field(default=None, compare=False, repr=False)

    def as_dict(self) -> dict[str, object]:
        return {"project": str(self.project), "store": str(self.store),
                "code_dir": str(self.code_dir), "in_place": list(self.in_place)}


def store_of(run_dir: Path) -> Path:
    """The store of the snapshots a run directory's job may run: beside the run directories."""
    return run_dir.parent / STORE_DIR


def code_spec(project: Path, run_dir: Path, in_place: tuple[str, ...]) -> CodeSpec:
    """The spec of a job whose run directory is `run_dir` (its store: `<output_dir>/.snapshots`)."""
    return CodeSpec(project=project, store=store_of(run_dir), code_dir=RunDir(run_dir).code,
                    keep_out=_keep_out(project, run_dir.parent), in_place=_paths(in_place))


def _keep_out(project: Path, runs: Path) -> tuple[str, ...]:
    rel = Path(os.path.relpath(runs, project)).as_posix()
    # A runs folder outside the project needs no keeping out.
    return () if rel.startswith("..") else (rel,)


def _paths(in_place: Sequence[str]) -> tuple[str, ...]:
    return tuple(p.strip("/") for p in in_place)


def view_ahead(project: Path, runs: Path, in_place: Sequence[str]) -> None:
    """Start git's view of `project` (hpctrain/startup/ahead.py) for check_here of a submit whose
    run directory goes into `runs`."""
    left_out = _keep_out(project, runs) + _paths(in_place)
    ahead.start(_view_key(project, left_out), lambda: git_view(project, left_out))


def _view(project: Path, left_out: tuple[str, ...]) -> str | None:
    return ahead.answer(_view_key(project, left_out), lambda: git_view(project, left_out))


def _view_key(project: Path, left_out: tuple[str, ...]) -> tuple[str, str, tuple[str, ...]]:
    return ("git view", str(project), left_out)


@contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except SnapshotError as e:
        raise HpctrainError(e.what, e.fix) from None
    except OSError as e:
        raise HpctrainError(f"cannot snapshot the project: {e}",
                            "check that the runs folder is writable, or submit with "
                            "--no-snapshot") from None


def check_here(spec: CodeSpec, local_project: Path, *, in_place_here: bool = True
               ) -> CodeSpec:
    """Refuse, without writing, what freezing would refuse; the spec with the files to freeze."""
    with _errors():
        listing = check_project(
            local_project, keep_out=spec.keep_out, in_place=spec.in_place,
            in_place_here=in_place_here, view=_view,
            # A login freezes the files listed here: only a freeze on this machine may skip
            # the listing on its store's word.
            store=spec.store if in_place_here else None)
    return replace(spec, listing=listing)


def snapshot_from_json(data: dict[str, object]) -> Snapshot:
    """The login's answer (script.py run there) as a Snapshot."""
    fields = {k: v for k, v in data.items() if k in Snapshot.__dataclass_fields__}
    fields["in_place"] = tuple(fields.get("in_place") or ())  # type: ignore[arg-type]
    return Snapshot(**fields)  # type: ignore[arg-type]


def script_source() -> str:
    """The modules a login runs with `python3 -c` as one program (hpctrain is not installed
    there): each put into sys.modules under its own name, then script.py's main."""
    here = Path(__file__).parent
    modules = tuple((f"hpctrain.snapshots.{m}", (here / f"{m}.py").read_text(encoding="utf-8"))
                    for m in SCRIPT_MODULES)
    return f"MODULES = {modules!r}\n{_BOOT}"


def link_here(spec: CodeSpec, snap_id: str) -> Snapshot:
    """Make the job's working directory from a snapshot the store already holds (a rerun)."""
    with _errors():
        snap = existing_snapshot(spec.store, snap_id, spec.in_place)
        link_code(spec.code_dir, snap, spec.project, spec.keep_out)
        return snap


def freeze_here(spec: CodeSpec) -> Snapshot:
    """Freeze the project on this machine and make the job's working directory from it."""
    with _errors():
        snap = freeze(spec.project, spec.store, keep_out=spec.keep_out,
                            in_place=spec.in_place, listing=spec.listing)
        link_code(spec.code_dir, snap, spec.project, spec.keep_out)
        return snap
