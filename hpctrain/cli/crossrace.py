"""`submit --first-of 2x4@raven,1x4@gilbreth`: one race per profile, each through the one
pipeline at its place, then the watcher that cancels the others once one starts
(submission/crossrace.py; docs/long-runs.md)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hpctrain.cli import backends
from hpctrain.cli.display import show
from hpctrain.cli.options import JobOptions, build_request
from hpctrain.cli.output import DISPLAYS, err_console, print_json, type_name

if TYPE_CHECKING:
    from hpctrain.places import Place
    from hpctrain.plan import JobRequest
    from hpctrain.submission.pipeline import Outcome
    from hpctrain.submission.race import Alternative, RaceSubmitted

Leg = tuple[str, "Place", "Outcome[Any, Any]"]


def _leg(job: JobOptions, name: str, main: str, alternatives: tuple[Alternative, ...],
         settings: dict[str, Any], login: str | None, dry_run: bool) -> Leg:
    """One profile's race, planned and (unless a dry run) submitted at its place (`main`:
    the -P profile's name)."""
    from hpctrain.submission.kinds import RaceKind
    from hpctrain.submission.pipeline import run
    from hpctrain.submission.questions import before_submit

    profile = job.profile if name == main else name
    request: JobRequest = replace(build_request(replace(job, profile=profile)), **settings)
    # --login names the -P profile's way in; another profile goes through its own.
    place = backends.place_for(request.profile, login if name == main else None,
                               job.python_env)
    history = backends.history()
    request = before_submit(request, place, history)
    return request.profile.name, place, run(RaceKind(request, alternatives), place, history,
                                            dry_run)


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
    done = [_leg(job, name, main, group, settings, login, True)
            for name, group in grouped.items()]
    if not dry_run:
        done = _submit_all(job, main, grouped, settings, login)
    watcher = None if dry_run else _watch(first_of, done)
    if json_out:
        print_json({"dry_run": dry_run, "first_of": first_of, "watcher": watcher,
                    "profiles": [{"profile": name, **_as_json(outcome, place, dry_run)}
                                 for name, place, outcome in done]})
        return True
    for name, place, outcome in done:
        err_console.print(f"profile {name}:", highlight=False)
        show(outcome, place, False)
    if watcher is not None:
        err_console.print(
            f"watching the race from this machine (pid {watcher['pid']}): once one profile's "
            f"job starts, the others are cancelled; log: {watcher['log']}", highlight=False,
            soft_wrap=True)
    return True


def _submit_all(job: JobOptions, main: str, grouped: dict[str, tuple[Alternative, ...]],
                settings: dict[str, Any], login: str | None) -> list[Leg]:
    """Each profile's race queued; if one cannot be, those queued already are cancelled."""
    from hpctrain.errors import HpctrainError
    from hpctrain.tracking import byplace

    done: list[Leg] = []
    try:
        for name, group in grouped.items():
            done.append(_leg(job, name, main, group, settings, login, False))
    except HpctrainError as e:
        rows = [row for _, _, o in done if o.result is not None for _, _, row in o.result.jobs]
        if rows:
            byplace.cancel(backends.history(), backends.local_place(), rows)
        raise HpctrainError(f"{e.what} (cancelled the other profiles' alternatives: "
                            f"{', '.join(r.job_id for r in rows) or 'none queued'})",
                            e.fix) from None
    return done


def _as_json(outcome: Outcome[Any, Any], place: Place, dry: bool) -> dict[str, object]:
    value = outcome.prepared if dry else outcome.result
    data = DISPLAYS[type_name(type(value))].json(outcome, place)
    if dry:
        return {**data, "scripts": [s.as_dict() for s in outcome.prepared.scripts()]}
    return {**data, **outcome.facts}


def _watch(first_of: str, done: list[Leg]) -> dict[str, object]:
    """Start the watcher over every leg's recorded alternatives."""
    from hpctrain.submission.crossrace import Watch, start_watcher, watch_file

    results: list[tuple[str, RaceSubmitted]] = [(n, o.result) for n, _, o in done
                                                 if o.result is not None]
    orders = Watch(first_of, tuple((name, tuple(row.id for _, _, row in got.jobs))
                                   for name, got in results))
    head = results[0][1]
    file = watch_file(head.jobs[0][1], head.cluster)
    pid = start_watcher(orders, file)
    return {"pid": pid, "orders": str(file), "log": str(file.with_suffix(".log"))}
