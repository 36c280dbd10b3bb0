"""Jobs grouped by the place they went through: one job watcher each (here, or a login)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hpctrain import places
from hpctrain.tracking.report import Refreshed, RefreshReport
from hpctrain.tracking.watcher import CancelReport, JobWatcher

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord
    from hpctrain.places import Place

LoginKey = places.PlaceKey


def watcher(history: History, place: Place, known: str = "") -> JobWatcher:
    """The job watcher for the cluster the place's SLURM commands talk to.

    `known`: the cluster the jobs were recorded on, for a login whose SLURM does not say.
    """
    client = place.slurm_client()
    return JobWatcher(client, history, place.cluster(client, known))


def by_login(records: Sequence[JobRecord], login: str | None
             ) -> dict[LoginKey, list[JobRecord]]:
    """The records grouped by the login they went through (a login given: only its jobs)."""
    return places.grouped(records, login)


def group_watcher(history: History, local: Place, group: Sequence[JobRecord]) -> JobWatcher:
    """The watcher for jobs of one login (all went through the same one, or none)."""
    return _watcher_of(history, places.place_for(group[0], local), group)


def _watcher_of(history: History, place: Place, group: Sequence[JobRecord]) -> JobWatcher:
    known = {r.cluster for r in group}
    return watcher(history, place, known.pop() if len(known) == 1 else "")


def refresh(history: History, local: Place, records: Sequence[JobRecord], login: str | None
            ) -> Refreshed:
    """Refresh each login's jobs through its own watcher (one round trip each over ssh)."""
    fresh: dict[int, JobRecord] = {}
    total, clusters = RefreshReport(), []
    starts: dict[str, str | None] = {}
    for place, group in places.by_place(records, local, login):
        w = _watcher_of(history, place, group)
        rows, report = w.refresh(group)
        fresh.update((r.id, r) for r in rows)
        if report.query is not None:
            starts.update(report.query.starts)
        clusters.append(place.shown_cluster(w.cluster))
        total.asked += report.asked
        total.calls += report.calls
        total.warnings += report.warnings
        total.error = total.error or report.error
    return Refreshed([fresh[r.id] for r in records if r.id in fresh], total,
                     ", ".join(clusters), starts)


def cancel(history: History, local: Place, records: Sequence[JobRecord], arrays: bool = False
           ) -> CancelReport:
    """One scancel per login (here, or over its ssh master) for the records' unfinished jobs
    (`arrays`: whole job arrays, by their ids)."""
    total = CancelReport()
    if not records:
        return watcher(history, local).cancel(records)
    for group in by_login(records, None).values():
        report = group_watcher(history, local, group).cancel(group, arrays)
        total.cancelled += report.cancelled
        total.skipped.update(report.skipped)
    return total
