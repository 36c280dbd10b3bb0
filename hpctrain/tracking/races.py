"""A race's winner learned once, at the race's place: its claim file is in the run directory,
which over a login is not on this disk (the history keeps what the login said)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hpctrain import places
from hpctrain.places import together
from hpctrain.tracking.selection import parse_claim, races_unlearned
from hpctrain.values.rundir import RunDir

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord
    from hpctrain.places import Place


def learn(history: History, records: Sequence[JobRecord], local: Place) -> list[JobRecord]:
    """`records`, each race's alternatives with its winner read now where it claimed the run
    (one round trip a login for every race) and stored; a race not claimed yet stays as is."""
    pending = races_unlearned(records)
    if not pending:
        return list(records)
    for place, group in places.by_place(pending, local):
        races = {(r.cluster, r.race_head): RunDir(str(r.run_dir)).race_winner for r in group}
        with together.reading(place, sorted(set(races.values()))) as read:
            for (cluster, head), claim in races.items():
                text = " ".join((read(claim) or b"").decode("utf-8", "replace").split())
                claimed = parse_claim(text) is not None
                if head is not None and (claimed or _ended(records, cluster, head)):
                    # A race that ended unclaimed is not asked about again ("": no winner).
                    history.set_race_winner(cluster, head, text if claimed else "")
    fresh = {r.id: r for r in history.by_row_ids([r.id for r in pending])}
    return [fresh.get(r.id, r) for r in records]


def _ended(records: Sequence[JobRecord], cluster: str, head: str) -> bool:
    return all(r.terminal for r in records if (r.cluster, r.race_head) == (cluster, head))
