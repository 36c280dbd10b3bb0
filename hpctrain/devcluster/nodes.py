"""Waiting for the emulated nodes: resume the ones an earlier run left drained, until all idle."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hpctrain.errors import HpctrainError
from hpctrain.slurm.client import SlurmClient

# sinfo's short states of a node that can take jobs. "plnd" (SLURM 22.05+): idle, but the
# backfill scheduler has planned a pending job onto it.
READY_STATES = ("idle", "mix", "alloc", "comp", "plnd")
_OUT_OF_SERVICE = ("drain", "drng", "down")


def nodes_to_resume(states: Mapping[str, str], resumed: set[str]) -> list[str]:
    """Drained or down nodes that slurmd answers for ('*' means it does not) not yet resumed."""
    return [n for n, s in states.items()
            if s.startswith(_OUT_OF_SERVICE) and not s.endswith("*") and n not in resumed]


@dataclass
class NodeWatch:
    """One poll at a time: are all nodes ready? Resumes drained nodes once each."""

    client: SlurmClient
    nodes: Sequence[str]
    last: dict[str, str] = field(default_factory=dict)
    resumed: set[str] = field(default_factory=set)

    def all_ready(self) -> bool:
        """One `sinfo`; True once every node can take jobs."""
        try:
            states = self.client.node_states()
        except HpctrainError:
            return False  # slurmctld busy starting: ask again
        self.last = states
        drained = nodes_to_resume(states, self.resumed)
        if drained:
            # Drained by an earlier run (e.g. a kill that timed out): jobs would never
            # start there, and ReturnToService does not lift a drain.
            with contextlib.suppress(HpctrainError):
                self.client.resume_nodes(drained)
            self.resumed.update(drained)
        return all(states.get(n) in READY_STATES for n in self.nodes)

    def reasons(self) -> str:
        """Why nodes are not ready, as `sinfo --list-reasons` says (for an error message)."""
        try:
            return self.client.node_reasons()
        except HpctrainError as e:
            return str(e)
