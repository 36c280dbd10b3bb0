"""What a rule returns, and the collector that gathers every rule's problems in order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from hpctrain.errors import PlanError

T = TypeVar("T")


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """A rule's decided value, the problems with the request, and its misfits with the partition."""

    value: T
    problems: tuple[str, ...] = ()
    # Misfits compare the request with the partition; they would mislead when that partition
    # is only a stand-in for an unknown one, so the collector may drop them.
    misfits: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


class Collector:
    """Collects the rules' problems and notes in the order the rules ran."""

    def __init__(self, check_fit: bool) -> None:
        self.problems: list[str] = []
        self.shape: list[str] = []
        self.notes: list[str] = []
        self._check_fit = check_fit

    def take(self, outcome: Outcome[T], shape: bool = False) -> T:
        """Record a rule's problems and notes; hand back its value. `shape`: the rule decides
        the job's shape, so changing the shaping options can fix its problems."""
        found = list(outcome.problems)
        if self._check_fit:
            found.extend(outcome.misfits)
        self.problems.extend(found)
        if shape:
            self.shape.extend(found)
        self.notes.extend(outcome.notes)
        return outcome.value

    def raise_any(self) -> None:
        """Raise one PlanError with every problem found, if there is any."""
        if self.problems:
            raise PlanError(list(self.problems), shape=self.shape)
