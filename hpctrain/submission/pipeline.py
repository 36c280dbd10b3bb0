"""The one submission pipeline: check the place, prepare, (dry run: stop), sync, execute."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from hpctrain.history import History
    from hpctrain.places import Place
    from hpctrain.submission.kinds import Kind

P = TypeVar("P")
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


def run(kind: Kind[P, R], place: Place, history: History, dry_run: bool) -> Outcome[P, R]:
    """Submit `kind` at `place`, or (`dry_run`) only decide everything it would do."""
    place.check()
    prepared = kind.prepare(place)
    if dry_run:
        return Outcome(prepared)
    # Synced only once the plan holds: a refused job sends nothing.
    synced = place.sync_project(place.adapt(kind.request).profile.output_dir)
    result = kind.execute(prepared, place, history)
    return Outcome(prepared, result, place.sync_facts(synced), place.sync_notes(synced))
