"""How every kind's outcome is shown, through the one registry (cli/output.py: displays) of
how a value type is shown for people and as JSON: a kind's dry run (its Planned value) and
its result. One job's values (submit, profiles probe, rerun) and a race across profiles (each
profile's race shown as its own) are registered here; a race's in cli/race.py, a sweep's in
cli/sweepview.py, a scaling study's in cli/scale.py.

A dry run is shown alike for every kind: the scripts on stdout, the kind's summary on stderr,
where it would write; as JSON, `dry_run`, the kind's fields and every script's text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from hpctrain.cli.flags import Flags
from hpctrain.cli.output import Display, display_of, err_console, print_json, register_displays

if TYPE_CHECKING:
    from hpctrain.places import Place
    from hpctrain.slurm.usage import Usage
    from hpctrain.submission.crossrace import CrossRace, CrossRaceSubmitted
    from hpctrain.submission.pipeline import Outcome
    from hpctrain.submission.planned import Planned
    from hpctrain.submission.prepare import Prepared
    from hpctrain.submission.submit import Submitted

DRY_RUN = Flags(("--dry-run",), "Print the scripts it would submit, the plan and where it "
                "would write; create and submit nothing.")


def __getattr__(name: str) -> Any:
    # DryRunOpt, the typer declaration, made when a command that click parses asks for it.
    if name == "DryRunOpt":
        return Annotated[bool, DRY_RUN.declaration()]
    raise AttributeError(name)

def show(outcome: Outcome[Any, Any], place: Place, json_out: bool) -> None:
    """The dry run or the result, whichever kind it was; what the place synced first."""
    dry = outcome.result is None
    display = display_of(outcome.prepared if dry else outcome.result)
    if display.whole and json_out:
        print_json(display.json(outcome, place))
        return
    if display.whole:
        display.people(outcome, place)
        return
    cost = dry_run_usage(outcome.prepared, place) if dry else None
    if json_out:
        print_json(outcome_json(outcome, place, cost))
        return
    if dry:
        from hpctrain.cli.render import show_scripts

        show_scripts(outcome.prepared.scripts())
        display.people(outcome, place)
        if cost is not None:
            from hpctrain.cli.costview import show_usage

            show_usage(outcome.prepared.scripts()[0].plan.profile, cost)
        err_console.print(nothing_written(outcome.prepared), highlight=False, soft_wrap=True)
        return
    for note in outcome.notes:
        err_console.print(note, highlight=False)
    display.people(outcome, place)


def outcome_json(outcome: Outcome[Any, Any], place: Place, cost: Usage | None = None
                 ) -> dict[str, object]:
    """What --json prints of any kind's dry run (with its scripts and `cost`, the account's
    usage) or result (with what the place synced)."""
    dry = outcome.result is None
    display = display_of(outcome.prepared if dry else outcome.result)
    data = display.json(outcome, place)
    if not dry or display.whole:
        return {**data, **outcome.facts}
    return {"dry_run": True, "job_id": None, **data,
            "scripts": [s.as_dict() for s in outcome.prepared.scripts()],
            "usage": cost.as_dict() if cost else None}


def dry_run_usage(prepared: Planned, place: Place) -> Usage | None:
    """What the account a dry run would charge has used, its fair share and what your jobs
    hold (docs/queue.md); None where the accounting cannot be asked."""
    from hpctrain.cli.costview import DEFAULT_DAYS, for_account
    from hpctrain.errors import HpctrainError

    scripts = prepared.scripts()
    try:
        found = place.slurm_client().usage(DEFAULT_DAYS)
    except HpctrainError:
        return None
    if found.unavailable and not found.accounts:
        return None
    return for_account(found, scripts[0].plan.account if scripts else None)


def nothing_written(prepared: Planned) -> str:
    """The dry run's last word: nothing done, and where it would have written."""
    dirs = prepared.run_dirs()
    scripts = prepared.scripts()
    if len(dirs) == 1:
        named = (f" (scripts {', '.join(s.path.name for s in scripts if s.path)})"
                 if len(scripts) > 1 else "")
        return (f"dry run: nothing created or submitted; the run directory would be "
                f"{dirs[0].path}{named}")
    return (f"dry run: nothing created or submitted; {len(dirs)} run directories would be "
            f"made in {dirs[0].path.parent} (each script's above)")


def _job_dry_run(outcome: Outcome[Prepared, None], place: Place) -> None:
    """One job's (submit, probe, rerun) plan on stderr, so that stdout stays the script."""
    from hpctrain.cli.render import show_summary

    prep = outcome.prepared
    show_summary(prep.plan)
    if prep.again is not None:
        err_console.print(f"a rerun of job {prep.again.of}, on its snapshot "
                          f"{prep.again.snapshot}", highlight=False)


def _job_dry_run_json(outcome: Outcome[Prepared, None], place: Place) -> dict[str, object]:
    prep = outcome.prepared
    again = ({"rerun_of": prep.again.of, "snapshot": {"id": prep.again.snapshot}}
             if prep.again is not None else {})
    return {**prep.as_dict(), "script_text": prep.script, **again}


def _submitted(outcome: Outcome[Prepared, Submitted], place: Place) -> None:
    """The job id, its run directory and how to follow it."""
    from hpctrain.cli.output import print_err, print_line

    done, plan = outcome.result, outcome.prepared.plan
    assert done is not None  # shown once submitted
    print_line(f"Submitted job {done.job_id} ({plan.nodes} node(s) x {plan.gpus_per_node} "
               f"GPU(s), profile {plan.profile}, cluster {done.cluster or '?'})",
               bold=str(done.job_id))
    if done.rerun_of:
        print_line(f"a rerun of job {done.rerun_of}")
    if len(done.chain) > 1:
        print_line(f"chain of {len(done.chain)} jobs, each after the one before: "
                   f"{', '.join(done.chain)}")
    print_line(f"run directory: {done.run_dir}")
    print_line(f"code:          {code_line(done)}")
    print_line(f"follow it:     hpctrain status {done.job_id}")
    print_line(f"               hpctrain logs -f {done.job_id}")
    for note in plan.notes:
        print_err(note, lead="note:", style="yellow")


def _submitted_json(outcome: Outcome[Prepared, Submitted], place: Place
                    ) -> dict[str, object]:
    assert outcome.result is not None
    return outcome.result.as_dict(outcome.prepared.plan)


def code_line(done: Submitted) -> str:
    """Which code the job runs: its snapshot, or the live project (--no-snapshot)."""
    snap = done.snapshot
    if snap is None:
        return f"{done.record.workdir} as it is when the job starts (--no-snapshot)"
    added = (f"{snap.added_files} new file(s) stored" if snap.added_files
             else "nothing new to store")
    return f"snapshot {snap.id} ({snap.files} file(s); {added})"


def _across(outcome: Outcome[CrossRace, CrossRaceSubmitted], place: Place) -> None:
    """Each profile's race as one submit shows it, then where the watcher logs."""
    done = outcome.result
    for leg in (outcome.prepared if done is None else done).legs:
        err_console.print(f"profile {leg.profile}:", highlight=False)
        show(leg.outcome, leg.place, False)
    if done is not None:
        err_console.print(
            f"watching the race from this machine (pid {done.watcher.pid}): once one profile's "
            f"job starts, the others are cancelled; log: {done.watcher.log}", highlight=False,
            soft_wrap=True)


def _across_json(outcome: Outcome[CrossRace, CrossRaceSubmitted], place: Place
                 ) -> dict[str, object]:
    done = outcome.result
    legs = (outcome.prepared if done is None else done).legs
    return {"dry_run": done is None, "first_of": outcome.prepared.first_of,
            "watcher": None if done is None else done.watcher.as_dict(),
            "profiles": [{"profile": leg.profile, **outcome_json(
                leg.outcome, leg.place,
                dry_run_usage(leg.outcome.prepared, leg.place) if done is None else None)}
                for leg in legs]}


def _displays() -> dict[type, Display]:
    """One job's values (those of submit, profiles probe and rerun alike), and a race across
    profiles, shown whole as each profile's race."""
    from hpctrain.submission.crossrace import CrossRace, CrossRaceSubmitted
    from hpctrain.submission.prepare import Prepared
    from hpctrain.submission.submit import Submitted

    across = Display(_across, _across_json, whole=True)
    return {Prepared: Display(_job_dry_run, _job_dry_run_json),
            Submitted: Display(_submitted, _submitted_json),
            CrossRace: across, CrossRaceSubmitted: across}


register_displays(_displays)
