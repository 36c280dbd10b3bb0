"""Quarantined nodes (`hpctrain nodes`) left out of the job, unless that makes it impossible.

Pure: the submit finds which nodes of the cluster are quarantined and which nodes each
partition has (submission/quarantine.py); this rule decides what the script excludes.
"""

from __future__ import annotations

from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome


def exclusion(req: JobRequest, partition: str, nodes: int) -> Outcome[tuple[str, ...]]:
    """The quarantined nodes to exclude (a note either way); none where the job needs them."""
    held = sorted(set(req.quarantined))
    if not held or req.ignore_quarantine:
        return Outcome(())
    known = None if req.partition_nodes is None else req.partition_nodes.get(partition)
    if known is not None:
        held = [n for n in held if n in known]
        if not held:
            return Outcome(())
        left = len(set(known) - set(held))
        if left < nodes:
            return Outcome((), notes=(
                f"quarantined {', '.join(held)} not excluded: the job needs {nodes} of "
                f"partition {partition}'s {len(known)} node(s) and only {left} would be left "
                f"(`hpctrain nodes` says why they are suspect)",))
    return Outcome(tuple(held), notes=(
        f"excluding quarantined node(s) {', '.join(held)} (`hpctrain nodes` says why; "
        "--ignore-quarantine uses them)",))
