"""What submit freezes for a job, and freezing it on this machine (store.py does the work)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from hpctrain.errors import HpctrainError
from hpctrain.snapshots import store
from hpctrain.snapshots.store import Listing, Snapshot
from hpctrain.startup import ahead
from hpctrain.values import rundir

# The store beside the run directories, on the file system every job writes to.
STORE_DIR = ".snapshots"


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
    return CodeSpec(project=project, store=store_of(run_dir), code_dir=run_dir / rundir.CODE,
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
    ahead.start(_view_key(project, left_out), lambda: store.git_view(project, left_out))


def _view(project: Path, left_out: tuple[str, ...]) -> str | None:
    return ahead.answer(_view_key(project, left_out), lambda: store.git_view(project, left_out))


def _view_key(project: Path, left_out: tuple[str, ...]) -> tuple[str, str, tuple[str, ...]]:
    return ("git view", str(project), left_out)


@contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except store.SnapshotError as e:
        raise HpctrainError(e.what, e.fix) from None
    except OSError as e:
        raise HpctrainError(f"cannot snapshot the project: {e}",
                            "check that the runs folder is writable, or submit with "
                            "--no-snapshot") from None


def check_here(spec: CodeSpec, local_project: Path, *, in_place_here: bool = True
               ) -> CodeSpec:
    """Refuse, without writing, what freezing would refuse; the spec with the files to freeze."""
    with _errors():
        listing = store.check_project(
            local_project, keep_out=spec.keep_out, in_place=spec.in_place,
            in_place_here=in_place_here, view=_view,
            # A login freezes the files listed here: only a freeze on this machine may skip
            # the listing on its store's word.
            store=spec.store if in_place_here else None)
    return replace(spec, listing=listing)


def snapshot_from_json(data: dict[str, object]) -> Snapshot:
    """The login's answer (store.py run as a script) as a Snapshot."""
    fields = {k: v for k, v in data.items() if k in Snapshot.__dataclass_fields__}
    fields["in_place"] = tuple(fields.get("in_place") or ())  # type: ignore[arg-type]
    return Snapshot(**fields)  # type: ignore[arg-type]


def script_source() -> str:
    """store.py's text, which a login runs with `python3 -c` (it imports nothing of hpctrain)."""
    return Path(store.__file__).read_text(encoding="utf-8")


def link_here(spec: CodeSpec, snap_id: str) -> Snapshot:
    """Make the job's working directory from a snapshot the store already holds (a rerun)."""
    with _errors():
        snap = store.existing_snapshot(spec.store, snap_id, spec.in_place)
        store.link_code(spec.code_dir, snap, spec.project, spec.keep_out)
        return snap


def freeze_here(spec: CodeSpec) -> Snapshot:
    """Freeze the project on this machine and make the job's working directory from it."""
    with _errors():
        snap = store.freeze(spec.project, spec.store, keep_out=spec.keep_out,
                            in_place=spec.in_place, listing=spec.listing)
        store.link_code(spec.code_dir, snap, spec.project, spec.keep_out)
        return snap
