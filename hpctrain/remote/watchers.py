"""Jobs grouped by the login they went through: one job watcher each (here, or over ssh)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from hpctrain.jobs.watcher import CancelReport, JobWatcher, RefreshReport

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord
    from hpctrain.remote.connection import Connection
    from hpctrain.slurm.client import SlurmClient

# The local SLURM client and its cluster's name, for jobs submitted from here.
Local = Callable[[], "tuple[SlurmClient, str]"]
LoginKey = tuple[str | None, str | None]


def watcher(history: History, local: Local, conn: Connection | None = None,
            known: str = "") -> JobWatcher:
    """The job watcher for the cluster the SLURM commands talk to (over `conn` if given).

    `known`: the cluster the jobs were recorded on, for a login whose SLURM does not say.
    """
    if conn is not None:
        from hpctrain.remote.site import slurm_client

        client = slurm_client(conn)
        cluster = client.cluster_name() or known
    else:
        client, cluster = local()
    return JobWatcher(client, history, cluster)


def by_login(records: Sequence[JobRecord], login: str | None
             ) -> dict[LoginKey, list[JobRecord]]:
    """The records grouped by the login they went through (a login given: only its jobs)."""
    groups: dict[LoginKey, list[JobRecord]] = {}
    for r in records:
        if login is None or r.login == login:
            groups.setdefault((r.login, r.login_config), []).append(r)
    return groups


def group_watcher(history: History, local: Local, group: Sequence[JobRecord]) -> JobWatcher:
    """The watcher for jobs of one login (all went through the same one, or none)."""
    from hpctrain.remote.site import for_record

    known = {r.cluster for r in group}
    return watcher(history, local, for_record(group[0]), known.pop() if len(known) == 1 else "")


def refresh(history: History, local: Local, records: Sequence[JobRecord], login: str | None,
            starts: dict[str, str | None] | None = None
            ) -> tuple[list[JobRecord], RefreshReport, str]:
    """Refresh each login's jobs through its own watcher (one round trip each over ssh).

    Returns the fresh records, the summed report and the clusters asked, for display.
    `starts` gets the expected start squeue gave for each job (the same call).
    """
    fresh: dict[int, JobRecord] = {}
    total, clusters = RefreshReport(), []
    for key, group in by_login(records, login).items():
        w = group_watcher(history, local, group)
        rows, report = w.refresh(group)
        fresh.update((r.id, r) for r in rows)
        if starts is not None:
            starts.update(w.client.starts)
        clusters.append(f"{w.cluster} via {key[0]}" if key[0] else w.cluster)
        total.asked += report.asked
        total.calls += report.calls
        total.warnings += report.warnings
        total.error = total.error or report.error
    return [fresh[r.id] for r in records if r.id in fresh], total, ", ".join(clusters)


def cancel(history: History, local: Local, records: Sequence[JobRecord]) -> CancelReport:
    """One scancel per login (here, or over its ssh master) for the records' unfinished jobs."""
    total = CancelReport()
    if not records:
        return watcher(history, local).cancel(records)
    for group in by_login(records, None).values():
        report = group_watcher(history, local, group).cancel(group)
        total.cancelled += report.cancelled
        total.skipped.update(report.skipped)
    return total


def connection_of(record: JobRecord, login: str | None) -> Connection | None:
    """The login a job went through (a login given replaces its destination); None: here."""
    from hpctrain.remote.connection import Target
    from hpctrain.remote.site import connection, for_record

    if login is None:
        return for_record(record)
    return connection(Target.of(login, record.login_config))
