"""The one submission pipeline: check the place, prepare, check what was prepared at the place,
(dry run: stop), sync, execute. Every kind goes through it, so every kind has a dry run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from hpctrain.errors import HpctrainError
from hpctrain.submission.planned import Planned

if TYPE_CHECKING:
    from hpctrain.history import History
    from hpctrain.places import Place
    from hpctrain.submission.kinds import Kind

P = TypeVar("P", bound=Planned)
R = TypeVar("R")


@dataclass(frozen=True)
class Outcome(Generic[P, R]):
    """What the pipeline did: the prepared value, and on a real run its result and sync."""

    prepared: P
    # None for a dry run: nothing was written, synced or queued.
    result: R | None = None
    # What the place did to bring the project there, for --json ({} where nothing was synced).
    facts: dict[str, object] = field(default_factory=dict)
    # The same for people, one line each.
    notes: tuple[str, ...] = ()


def checked(prepared: P, place: Place) -> P:
    """`prepared` once the place accepts it: every run directory can be made, every file to
    copy loads, the project can be snapshotted (its files listed once, for every script)."""
    for run_dir in prepared.run_dirs():
        place.check_files(run_dir.path, run_dir.files)
    code = prepared.frozen_code()
    return prepared if code is None else prepared.with_listing(place.check_code(code))


def plan(kind: Kind[P, R], place: Place) -> P:
    """Everything `kind` would do at `place`, decided and checked there (a dry run's value).
    The dry run fails wherever the real submit would, before SLURM is asked to queue, but
    for the paths the jobs start from (`require_paths`): a dry run shows a script for a place
    that may get its image later, and asks the place nothing for it."""
    place.check()
    return checked(kind.prepare(place), place)


def require_paths(prepared: Planned, place: Place) -> None:
    """Refuse a job whose container image is missing at `place` before anything is written
    or queued: on the node it would fail only once it left the queue."""
    paths = prepared.needed_paths()
    missing = place.paths_missing(paths) if paths else []
    if missing:
        raise HpctrainError(
            f"container image {', '.join(missing)} does not exist {place.where}: the job "
            "would wait in the queue only for its ranks to find no image to start in",
            "check the --container path, or put the image there first (where the nodes see "
            "it at the same path: a shared file system)")


def act(kind: Kind[P, R], prepared: P, place: Place, history: History) -> Outcome[P, R]:
    """Bring the project to the place (once the plan holds: a refused job sends nothing) and
    submit what `plan` decided, once the place has the paths its jobs start from."""
    folder = kind.runs_folder
    if folder is None:
        require_paths(prepared, place)
        return Outcome(prepared, kind.execute(prepared, place, history))
    synced = place.sync_project(folder)
    # After the sync: an image inside the project reaches a login with it.
    require_paths(prepared, place)
    result = kind.execute(prepared, place, history)
    return Outcome(prepared, result, place.sync_facts(synced), place.sync_notes(synced))


def run(kind: Kind[P, R], place: Place, history: History, dry_run: bool) -> Outcome[P, R]:
    """Submit `kind` at `place`, or (`dry_run`) only decide everything it would do."""
    prepared = plan(kind, place)
    return Outcome(prepared) if dry_run else act(kind, prepared, place, history)
