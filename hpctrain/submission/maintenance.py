"""The maintenance windows a submit must fit before (plan/maintenance.py decides).

One SLURM call (`scontrol show reservation`) per submit or `render --check`; a second
(each partition's nodes) only where a maintenance reservation exists and the quarantine has
not asked it already. Through a login both go over its one connection.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from hpctrain.errors import SlurmError
from hpctrain.slurm import reservations
from hpctrain.slurm.runner import controller_gone

if TYPE_CHECKING:
    from hpctrain.places import Place
    from hpctrain.plan import JobRequest
    from hpctrain.slurm.client import SlurmClient


def with_maintenance(req: JobRequest, place: Place | None = None,
                     client: SlurmClient | None = None) -> JobRequest:
    """`req` with its cluster's maintenance reservations and the time they were read;
    unchanged where SLURM cannot say (the submit itself then says what is wrong)."""
    client = client or (place.slurm_client() if place else None)
    if client is None:
        return req
    try:
        found = reservations.maintenance(client.reservations())
        nodes = req.partition_nodes
        if found and nodes is None:
            nodes = client.partition_nodes()
    except SlurmError as e:
        if controller_gone(e):
            raise
        return req
    return dataclasses.replace(req, maintenance=tuple(found), partition_nodes=nodes,
                               now=time.time())
