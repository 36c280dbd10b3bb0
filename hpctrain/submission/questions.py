"""What every submission asks its cluster before it is planned: the quarantined nodes to keep
away from, the maintenance windows to end before, what the user's jobs already hold against a
budget. One door for submit, sweep, scale and rerun, so that none plans without them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpctrain.submission.budget import with_budget
from hpctrain.submission.maintenance import with_maintenance
from hpctrain.submission.quarantine import with_quarantine

if TYPE_CHECKING:
    from hpctrain.history import History
    from hpctrain.places import Place
    from hpctrain.plan import JobRequest


def before_submit(req: JobRequest, place: Place, history: History) -> JobRequest:
    """`req` with what the cluster says now (each question costs nothing where it does not
    apply: no quarantined node, no budget)."""
    return with_budget(with_maintenance(with_quarantine(req, place, history), place), place)
