"""`hpctrain submit`: prepare a job as a value, then show it (--dry-run) or execute it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hpctrain.cli import backends
from hpctrain.cli.options import JobOptions, LoginOpt, build_request, with_job_options
from hpctrain.cli.output import console, err_console, print_json
from hpctrain.cli.race import FirstOfOpt
from hpctrain.cli.render import show_script, show_summary

if TYPE_CHECKING:
    from hpctrain.places import Place
    from hpctrain.submission.pipeline import Outcome
    from hpctrain.submission.prepare import Prepared
    from hpctrain.submission.submit import Submitted

DryRunOpt = Annotated[
    bool,
    typer.Option("--dry-run", help="Print the plan, script and run directory; "
                 "create and submit nothing."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output (docs/jobs.md).")]
ChainOpt = Annotated[
    int, typer.Option("--chain", help="Queue N jobs, each after the one before, sharing one run "
                      "directory: a long training carried on past the time limit.")
]
SnapshotOpt = Annotated[
    bool, typer.Option("--snapshot/--no-snapshot", help="Run the project as it is now, frozen "
                       "into a snapshot (default), or run it in place, as it will be when the "
                       "job starts (docs/jobs.md, \"Code snapshots\").")
]
InPlaceOpt = Annotated[
    list[str] | None, typer.Option("--in-place", metavar="PATH", help="A project path (data) "
                                   "the job reads where it is instead of from the snapshot; "
                                   "repeat for more.")
]
AfterOpt = Annotated[
    str | None, typer.Option("--after", help="Start only after these jobs ended well "
                             "(afterok), e.g. --after 1234,1235.")
]


def show_dry_run(prep: Prepared, place: Place, json_out: bool) -> None:
    """What submit would do: the script on stdout, the plan and run directory on stderr."""
    if json_out:
        print_json({"dry_run": True, "job_id": None, **prep.as_dict(),
                    "script_text": prep.script})
        return
    show_script(prep.script)
    show_summary(prep.plan)
    err_console.print(
        f"dry run: nothing created or submitted; the run directory would be {prep.run_dir}",
        highlight=False,
    )


def show_submitted(outcome: Outcome[Prepared, Submitted], json_out: bool) -> None:
    """The job id, its run directory and how to follow it."""
    done, plan = outcome.result, outcome.prepared.plan
    assert done is not None  # shown once submitted
    if json_out:
        print_json({**done.as_dict(plan), **outcome.facts})
        return
    console.print(
        f"Submitted job [bold]{done.job_id}[/] ({plan.nodes} node(s) x "
        f"{plan.gpus_per_node} GPU(s), profile {plan.profile}, cluster "
        f"{done.cluster or '?'})",
        highlight=False,
    )
    if len(done.chain) > 1:
        console.print(f"chain of {len(done.chain)} jobs, each after the one before: "
                      f"{', '.join(done.chain)}", highlight=False)
    console.print(f"run directory: {done.run_dir}", highlight=False, soft_wrap=True)
    console.print(f"code:          {code_line(done)}", highlight=False, soft_wrap=True)
    console.print(f"follow it:     hpctrain status {done.job_id}", highlight=False)
    console.print(f"               hpctrain logs -f {done.job_id}", highlight=False)
    for note in plan.notes:
        err_console.print(f"[yellow]note:[/] {note}")


def code_line(done: Submitted) -> str:
    """Which code the job runs: its snapshot, or the live project (--no-snapshot)."""
    snap = done.snapshot
    if snap is None:
        return f"{done.record.workdir} as it is when the job starts (--no-snapshot)"
    added = (f"{snap.added_files} new file(s) stored" if snap.added_files
             else "nothing new to store")
    return f"snapshot {snap.id} ({snap.files} file(s); {added})"


# How each kind's dry run and result are shown, by the type of the value.
DRY_RUNS: dict[type, Callable[[Any, Place, bool], None]] = {}
RESULTS: dict[type, Callable[[Any, bool], None]] = {}


def show(outcome: Outcome[Any, Any], place: Place, json_out: bool) -> None:
    """The dry run or the result, whichever kind it was; what the place synced first."""
    if outcome.result is None:
        DRY_RUNS[type(outcome.prepared)](outcome.prepared, place, json_out)
        return
    for note in () if json_out else outcome.notes:
        err_console.print(note, highlight=False)
    RESULTS[type(outcome.result)](outcome, json_out)


@with_job_options
def submit(
    job: JobOptions, chain: ChainOpt = 1, after: AfterOpt = None,
    login: LoginOpt = None, first_of: FirstOfOpt = None, snapshot: SnapshotOpt = True,
    in_place: InPlaceOpt = None, dry_run: DryRunOpt = False, json_out: JsonOpt = False,
) -> None:
    """Submit a job: render it, create its run directory, sbatch it and record it."""
    from dataclasses import replace

    from hpctrain.submission.kinds import submission
    from hpctrain.submission.pipeline import run

    _register_displays()
    if in_place and not snapshot:
        from hpctrain.errors import HpctrainError

        raise HpctrainError("--in-place names data to leave out of the snapshot, and "
                            "--no-snapshot makes none", "drop one of the two")
    after_ids = tuple(a.strip() for a in (after or "").split(",") if a.strip())
    request = replace(build_request(job), chain=chain, after=after_ids, snapshot=snapshot,
                      in_place=tuple(in_place or ()))
    place = backends.place_for(request.profile, login, job.python_env)
    outcome = run(submission(request, first_of), place, backends.history(), dry_run)
    show(outcome, place, json_out)


def _register_displays() -> None:
    # Filled on first use: the value types live in modules that `--help` need not import.
    from hpctrain.cli import race
    from hpctrain.submission.prepare import Prepared
    from hpctrain.submission.race import Race, RaceSubmitted
    from hpctrain.submission.submit import Submitted

    DRY_RUNS.update({Prepared: show_dry_run, Race: race.race_dry_run})
    RESULTS.update({Submitted: show_submitted, RaceSubmitted: race.show_race_submitted})


def register(app: typer.Typer) -> None:
    """Add submit to the root app."""
    app.command(
        context_settings={"allow_interspersed_args": False},
        epilog="Example: hpctrain submit --profile local --nodes 2 -- printenv SLURMD_NODENAME",
    )(submit)
