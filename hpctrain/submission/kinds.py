"""Submission kinds: each is planned as a value (`prepare`, the dry run), then executed.

A kind never asks where it runs: the place (hpctrain.places) is a parameter, so `--login`
combines with every kind. A scaling study's kind is studies/scaling_study.py's StudyKind.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from hpctrain.history import History
    from hpctrain.places import Place
    from hpctrain.plan import JobRequest
    from hpctrain.submission.prepare import Prepared
    from hpctrain.submission.race import Race, RaceSubmitted
    from hpctrain.submission.submit import Submitted
    from hpctrain.units import Topology

P = TypeVar("P")
R_co = TypeVar("R_co", covariant=True)


class Kind(Protocol[P, R_co]):
    """One way of submitting: what it would do as a value, then doing it at a place."""

    @property
    def request(self) -> JobRequest:
        """The job every submission of the kind starts from (the profile, the options)."""
        ...

    def prepare(self, place: Place) -> P:
        """Everything decided, nothing written or queued (the dry run shows this value)."""
        ...

    def execute(self, prepared: P, place: Place, history: History) -> R_co:
        """Write, queue and record what `prepare` decided."""
        ...


@dataclass(frozen=True)
class JobKind:
    """One job, or a chain of `request.chain` jobs sharing a run directory."""

    request: JobRequest

    def prepare(self, place: Place) -> Prepared:
        from hpctrain.submission.prepare import prepare

        prep = prepare(place.adapt(self.request), place.workdir, environ=os.environ)
        # The dry run must fail wherever the real submit would, before SLURM is asked.
        place.check_files(prep.run_dir, prep.files)
        if prep.code is not None:
            prep = dataclasses.replace(prep, code=place.check_code(prep.code))
        return prep

    def execute(self, prepared: Prepared, place: Place, history: History) -> Submitted:
        from hpctrain.submission.submit import submit

        return submit(prepared, place, history)


@dataclass(frozen=True)
class RaceKind:
    """`--first-of`: the same job as alternative topologies; the first to start wins."""

    request: JobRequest
    shapes: tuple[Topology, ...]

    def prepare(self, place: Place) -> Race:
        from hpctrain.submission.race import prepare_race

        race = prepare_race(place.adapt(self.request), self.shapes, place.workdir,
                            environ=os.environ)
        place.check_files(race.run_dir, race.files())
        first, *others = race.alternatives
        if first.code is not None:
            # The run directory (and its code) is the first alternative's, for all of them.
            checked = dataclasses.replace(first, code=place.check_code(first.code))
            race = dataclasses.replace(race, alternatives=(checked, *others))
        return race

    def execute(self, prepared: Race, place: Place, history: History) -> RaceSubmitted:
        from hpctrain.submission.race import submit_race

        return submit_race(prepared, place, history)


@dataclass(frozen=True)
class ProbeKind:
    """`profiles probe`: a one-minute job that reports the node's network and GPUs."""

    request: JobRequest
    # Told of the queued probe before the wait for it starts.
    on_submit: Callable[[Submitted], None] = lambda _: None

    def prepare(self, place: Place) -> Prepared:
        from hpctrain.submission.probe import prepare_probe

        prep = prepare_probe(place.adapt(self.request), place.workdir)
        place.check_files(prep.run_dir, prep.files)
        return prep

    def execute(self, prepared: Prepared, place: Place, history: History
                ) -> tuple[Submitted, str]:
        from hpctrain.submission.probe import run_probe

        return run_probe(prepared, place, history, on_submit=self.on_submit)


def submission(request: JobRequest, first_of: str | None) -> Kind[Any, Any]:
    """`submit`'s kind: a race with --first-of NxG,..., else one job (or a chain)."""
    if first_of is None:
        return JobKind(request)
    from hpctrain.submission.race import parse_first_of

    return RaceKind(request, parse_first_of(first_of))
