"""Which nodes a submit keeps away from: the quarantined ones of its cluster (`hpctrain nodes`).

Costs nothing while no node is quarantined; else two SLURM calls (the cluster's name, each
partition's nodes), so that the plan can tell a job that needs every node (plan/quarantine.py).
"""

from __future__ import annotations

import dataclasses
import os
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from hpctrain.diagnosis import badnodes
from hpctrain.errors import SlurmError
from hpctrain.slurm.client import controller_gone

if TYPE_CHECKING:
    from hpctrain.history import History
    from hpctrain.places import Place
    from hpctrain.plan import JobRequest


def with_quarantine(req: JobRequest, place: Place, history: History) -> JobRequest:
    """`req` with its cluster's quarantined nodes and each partition's nodes (as SLURM lists
    them now); unchanged where none is quarantined or --ignore-quarantine is given."""
    if req.ignore_quarantine:
        return req
    hours = badnodes.quarantine_hours(os.environ.get("HPCTRAIN_QUARANTINE_HOURS"))
    held = badnodes.quarantined(history.suspects(), datetime.now(timezone.utc), hours)
    if not held:
        return req
    client = place.slurm_client()
    try:
        cluster = place.cluster(client, req.profile.cluster)
        nodes = client.partition_nodes()
    except SlurmError as e:
        if controller_gone(e):
            raise
        return req  # the submit itself says what is wrong with SLURM
    mine = tuple(q.node for q in held if q.cluster == cluster)
    return dataclasses.replace(req, quarantined=mine, partition_nodes=nodes) if mine else req
