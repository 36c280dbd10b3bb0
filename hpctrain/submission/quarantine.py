"""Which nodes a submit keeps away from: the quarantined ones of its cluster (`hpctrain nodes`).

Costs nothing while no node is quarantined and no --retries is given; else two SLURM calls
(the cluster's name, each partition's nodes) so that the plan can tell a job that needs every
node (plan/quarantine.py), or one (each partition's nodes) so that it can tell a --retries
that no retry could honour (plan/stall.py).
"""

from __future__ import annotations

import dataclasses
import os
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from hpctrain.diagnosis import badnodes
from hpctrain.errors import SlurmError
from hpctrain.slurm.runner import controller_gone

if TYPE_CHECKING:
    from hpctrain.diagnosis.badnodes import Quarantined
    from hpctrain.history import History
    from hpctrain.places import Place
    from hpctrain.plan import JobRequest


def standing(history: History, cluster: str | None = None
             ) -> tuple[list[Quarantined], list[Quarantined], float]:
    """(the quarantined nodes, the nodes only watched, the hours evidence counts) now; the
    jobs' commands are read only where stalls of several jobs point at one node."""
    hours = badnodes.quarantine_hours(os.environ.get("HPCTRAIN_QUARANTINE_HOURS"))
    found = history.suspects(cluster)
    jobs = badnodes.stall_jobs(found)
    programs = {(r.cluster, r.job_id): badnodes.program_of(r.command)
                for r in history.by_job_ids(jobs)} if jobs else {}
    now = datetime.now(timezone.utc)
    return (badnodes.quarantined(found, now, hours, programs),
            badnodes.watched(found, now, hours, programs), hours)


def with_quarantine(req: JobRequest, place: Place, history: History) -> JobRequest:
    """`req` with its cluster's quarantined nodes and each partition's nodes (as SLURM lists
    them now); unchanged where none is quarantined (or --ignore-quarantine is given) and
    no --retries needs the partition's size."""
    held = [] if req.ignore_quarantine else standing(history)[0]
    sized = not req.retries or req.partition_nodes is not None or _profile_sizes(req)
    if not held and sized:
        return req
    client = place.slurm_client()
    try:
        cluster = place.cluster(client, req.profile.cluster) if held else ""
        nodes = client.partition_nodes()
    except SlurmError as e:
        if controller_gone(e):
            raise
        return req  # the submit itself says what is wrong with SLURM
    mine = tuple(q.node for q in held if q.cluster == cluster)
    return dataclasses.replace(req, quarantined=mine or req.quarantined, partition_nodes=nodes)


def _profile_sizes(req: JobRequest) -> bool:
    """Whether the profile says how many nodes each partition has (then no SLURM call)."""
    from hpctrain.plan.stall import profile_size

    return all(profile_size(p) is not None for p in req.profile.partitions)
