"""Submission kinds: each is planned as a value (`prepare`, the dry run), then executed.

A kind never asks where it runs: the place (hpctrain.places) is a parameter, so `--login`
combines with every kind. Every `prepare` returns a Planned value (submission/planned.py):
its scripts, run directories and files, so that the pipeline checks them and the dry run shows
them alike for every kind. The other kinds: SweepKind (submission/sweep.py), RerunKind
(submission/rerun.py), StudyKind (submission/scaling_study.py), CrossRaceKind
(submission/crossrace.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from hpctrain.errors import HpctrainError

if TYPE_CHECKING:
    from hpctrain.history import History
    from hpctrain.places import Place
    from hpctrain.plan import JobRequest
    from hpctrain.submission.planned import Planned, Script
    from hpctrain.submission.prepare import Prepared
    from hpctrain.submission.race import Alternative, Race, RaceSubmitted
    from hpctrain.submission.submit import Submitted

P = TypeVar("P", bound="Planned")
R_co = TypeVar("R_co", covariant=True)


class Kind(Protocol[P, R_co]):
    """One way of submitting: what it would do as a value, then doing it at a place."""

    @property
    def runs_folder(self) -> str | None:
        """The profile's output_dir, left out when the project is brought to the place (None:
        the kind needs no project there)."""
        ...

    def prepare(self, place: Place) -> P:
        """Everything decided, nothing written or queued (the dry run shows this value); the
        pipeline checks its files and code at the place."""
        ...

    def execute(self, prepared: P, place: Place, history: History) -> R_co:
        """Write, queue and record what `prepare` decided."""
        ...


@dataclass(frozen=True)
class JobKind:
    """One job, or a chain of `request.chain` jobs sharing a run directory."""

    request: JobRequest

    @property
    def runs_folder(self) -> str:
        return self.request.profile.output_dir

    def prepare(self, place: Place) -> Prepared:
        from hpctrain.submission.prepare import prepare

        return prepare(place.adapt(self.request), place.workdir, environ=os.environ)

    def preview(self) -> tuple[Script, ...]:
        """`render`: the script without a run directory, never submitted."""
        from hpctrain.render.script import plan_script
        from hpctrain.submission.planned import Script

        plan, text = plan_script(self.request, environ=os.environ)
        return (Script("", None, text, plan),)

    def execute(self, prepared: Prepared, place: Place, history: History) -> Submitted:
        from hpctrain.submission.submit import submit

        return submit(prepared, place, history)


@dataclass(frozen=True)
class RaceKind:
    """`--first-of`: the same job as alternative topologies; the first to start wins."""

    request: JobRequest
    shapes: tuple[Alternative, ...]

    @property
    def runs_folder(self) -> str:
        return self.request.profile.output_dir

    def prepare(self, place: Place) -> Race:
        from hpctrain.submission.race import prepare_race

        return prepare_race(place.adapt(self.request), self.shapes, place.workdir,
                            environ=os.environ)

    def preview(self) -> tuple[Script, ...]:
        """`render --first-of`: every alternative's script, without a run directory."""
        from hpctrain.submission.planned import Script
        from hpctrain.submission.race import plan_race

        return tuple(Script(plan.race or "", None, text, plan) for plan, text in
                     plan_race(self.request, self.shapes, environ=os.environ))

    def execute(self, prepared: Race, place: Place, history: History) -> RaceSubmitted:
        from hpctrain.submission.race import submit_race

        return submit_race(prepared, place, history)


@dataclass(frozen=True)
class ProbeKind:
    """`profiles probe`: a one-minute job that reports the node's network and GPUs."""

    request: JobRequest
    # Told of the queued probe before the wait for it starts.
    on_submit: Callable[[Submitted], None] = lambda _: None

    @property
    def runs_folder(self) -> str:
        return self.request.profile.output_dir

    def prepare(self, place: Place) -> Prepared:
        from hpctrain.submission.probe import prepare_probe

        return prepare_probe(place.adapt(self.request), place.workdir)

    def execute(self, prepared: Prepared, place: Place, history: History
                ) -> tuple[Submitted, str]:
        from hpctrain.submission.probe import run_probe

        return run_probe(prepared, place, history, on_submit=self.on_submit)


def submission(request: JobRequest, first_of: str | None) -> JobKind | RaceKind:
    """`submit`'s and `render`'s kind: a race with --first-of NxG,..., else one job (or a
    chain)."""
    if first_of is None:
        return JobKind(request)
    from hpctrain.submission.race import is_across, parse_first_of

    alternatives = parse_first_of(first_of)
    if is_across(alternatives, request.profile.name):
        raise HpctrainError(
            f"--first-of {first_of!r} names other profiles: a race across clusters is "
            "submitted one race per profile, not one script set",
            f"see its scripts with `hpctrain submit --first-of {first_of} --dry-run`")
    return RaceKind(request, alternatives)
