"""`submit --first-of 2x4@raven,1x4@gilbreth`: one race per profile, each through the one
pipeline at its place, then the watcher that cancels the others once one starts
(submission/crossrace.py; docs/long-runs.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from hpctrain.cli import backends
from hpctrain.cli.display import dry_run_usage, outcome_json, show
from hpctrain.cli.options import JobOptions, build_request
from hpctrain.cli.output import err_console, print_json

if TYPE_CHECKING:
    from hpctrain.places import Place
    from hpctrain.plan import JobRequest
    from hpctrain.submission.kinds import RaceKind
    from hpctrain.submission.pipeline import Outcome
    from hpctrain.submission.race import Alternative, Race, RaceSubmitted

@dataclass(frozen=True)
class Leg:
    """One profile's race, planned at its place; `outcome` once shown or submitted."""

    profile: str
    place: Place
    kind: RaceKind
    prepared: Race
    outcome: Outcome[Race, RaceSubmitted]


def _leg(job: JobOptions, name: str, main: str, alternatives: tuple[Alternative, ...],
         settings: dict[str, Any], login: str | None) -> Leg:
    """One profile's race, decided and checked at its place (`main`: the -P profile's
    name), as a dry run would show it."""
    from hpctrain.submission.kinds import RaceKind
    from hpctrain.submission.pipeline import Outcome, plan
    from hpctrain.submission.questions import before_submit

    profile = job.profile if name == main else name
    request: JobRequest = replace(build_request(replace(job, profile=profile)), **settings)
    # --login names the -P profile's way in; another profile goes through its own.
    place = backends.place_for(request.profile, login if name == main else None,
                               job.python_env)
    kind = RaceKind(before_submit(request, place, backends.history()), alternatives)
    prepared = plan(kind, place)
    return Leg(request.profile.name, place, kind, prepared, Outcome(prepared))


def submit_across(job: JobOptions, main: str, first_of: str, settings: dict[str, Any],
                  login: str | None, dry_run: bool, json_out: bool) -> bool:
    """Every profile's race, then the watcher; each shown as one submit shows it. False where
    every alternative is `main`'s (-P's) own: a race on one cluster."""
    from hpctrain.submission.crossrace import legs
    from hpctrain.submission.race import parse_first_of

    grouped = legs(parse_first_of(first_of), main)
    if len(grouped) == 1:
        return False
    # Plan then act: every profile's race is planned before any is queued.
    done = [_leg(job, name, main, group, settings, login) for name, group in grouped.items()]
    if not dry_run:
        done = _submit_all(done)
    watcher = None if dry_run else _watch(first_of, done)
    if json_out:
        print_json({"dry_run": dry_run, "first_of": first_of, "watcher": watcher,
                    "profiles": [{"profile": leg.profile, **_as_json(leg, dry_run)}
                                 for leg in done]})
        return True
    for leg in done:
        err_console.print(f"profile {leg.profile}:", highlight=False)
        show(leg.outcome, leg.place, False)
    if watcher is not None:
        err_console.print(
            f"watching the race from this machine (pid {watcher['pid']}): once one profile's "
            f"job starts, the others are cancelled; log: {watcher['log']}", highlight=False,
            soft_wrap=True)
    return True


def _submit_all(planned: list[Leg]) -> list[Leg]:
    """Each profile's race queued as planned; if one cannot be, those queued already are
    cancelled."""
    from hpctrain.errors import HpctrainError
    from hpctrain.submission.pipeline import act
    from hpctrain.tracking import byplace

    history = backends.history()
    done: list[Leg] = []
    try:
        for leg in planned:
            done.append(replace(leg, outcome=act(leg.kind, leg.prepared, leg.place, history)))
    except HpctrainError as e:
        rows = [row for leg in done if leg.outcome.result is not None
                for _, _, row in leg.outcome.result.jobs]
        if rows:
            byplace.cancel(history, backends.local_place(), rows)
        raise HpctrainError(f"{e.what} (cancelled the other profiles' alternatives: "
                            f"{', '.join(r.job_id for r in rows) or 'none queued'})",
                            e.fix) from None
    return done


def _as_json(leg: Leg, dry: bool) -> dict[str, object]:
    cost = dry_run_usage(leg.prepared, leg.place) if dry else None
    return outcome_json(leg.outcome, leg.place, cost)


def _watch(first_of: str, done: list[Leg]) -> dict[str, object]:
    """Start the watcher over every leg's recorded alternatives."""
    from hpctrain.submission.crossrace import Watch, start_watcher, watch_file

    results = [(leg.profile, leg.outcome.result) for leg in done
               if leg.outcome.result is not None]
    orders = Watch(first_of, tuple((name, tuple(row.id for _, _, row in got.jobs))
                                   for name, got in results))
    head = results[0][1]
    file = watch_file(head.jobs[0][1], head.cluster)
    pid = start_watcher(orders, file)
    return {"pid": pid, "orders": str(file), "log": str(file.with_suffix(".log"))}
