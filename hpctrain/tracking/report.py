"""What a refresh of tracked jobs said, as values: `status` shows them, and shows them when
nothing was asked without importing the watcher, the places or the SLURM client."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpctrain.errors import SlurmUnavailableError
    from hpctrain.history import JobRecord
    from hpctrain.slurm.query import QueueResult
    from hpctrain.tracking.overview import Overview


@dataclass
class RefreshReport:
    """What one refresh did: how many jobs it asked about and in how many SLURM calls."""

    asked: int = 0
    calls: int = 0
    # What SLURM said to the refresh's queue query (None: it asked nothing, or squeue failed).
    query: QueueResult | None = None
    warnings: list[str] = field(default_factory=list)
    # SLURM could not be asked (controller down, no configuration): the states are the last
    # ones seen, nothing was stored.
    error: SlurmUnavailableError | None = None


@dataclass(frozen=True)
class Refreshed:
    """One refresh of jobs through their places, for display."""

    # The rows as stored now, in the order asked.
    records: list[JobRecord]
    # What the refresh did, summed over the places.
    report: RefreshReport
    # The clusters asked ("c", "c via login"), comma-separated.
    cluster: str
    # The start squeue gave for each job asked (expected while it waits; None: none yet).
    starts: Mapping[str, str | None]
    # The one job listed: its run directory's overview (None: more jobs, or no run directory).
    overview: Overview | None = None

    @classmethod
    def unasked(cls, records: list[JobRecord]) -> Refreshed:
        """`records` as the history holds them: SLURM was not asked."""
        return cls(records, RefreshReport(), "", {})
