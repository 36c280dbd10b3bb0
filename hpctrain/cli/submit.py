"""`hpctrain submit`: prepare a job as a value, then show it (--dry-run) or execute it."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from hpctrain.cli import backends
from hpctrain.cli.display import DryRunOpt, show
from hpctrain.cli.login import LoginOpt
from hpctrain.cli.options import JobOptions, build_request, with_job_options
from hpctrain.cli.race import FirstOfOpt

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


@with_job_options()
def submit(
    job: JobOptions, chain: ChainOpt = 1, after: AfterOpt = None,
    login: LoginOpt = None, first_of: FirstOfOpt = None, snapshot: SnapshotOpt = True,
    in_place: InPlaceOpt = None, dry_run: DryRunOpt = False, json_out: JsonOpt = False,
) -> None:
    """Submit a job: render it, create its run directory, sbatch it and record it."""
    from dataclasses import replace

    from hpctrain.submission.kinds import Kind, submission
    from hpctrain.submission.pipeline import run
    from hpctrain.submission.questions import before_submit

    if in_place and not snapshot:
        from hpctrain.errors import HpctrainError

        raise HpctrainError("--in-place names data to leave out of the snapshot, and "
                            "--no-snapshot makes none", "drop one of the two")
    after_ids = tuple(a.strip() for a in (after or "").split(",") if a.strip())
    settings: dict[str, Any] = {"chain": chain, "after": after_ids, "snapshot": snapshot,
                                "in_place": tuple(in_place or ())}
    request = replace(build_request(job), **settings)
    if first_of and "@" in first_of:
        from hpctrain.cli.crossrace import submit_across

        if submit_across(job, request.profile.name, first_of, settings, login, dry_run,
                         json_out):
            return
    place = backends.place_for(request.profile, login, job.python_env)
    history = backends.history()
    request = before_submit(request, place, history)
    kind: Kind[Any, Any] = submission(request, first_of)
    show(run(kind, place, history, dry_run), place, json_out)


def register(app: typer.Typer) -> None:
    """Add submit to the root app."""
    app.command(
        context_settings={"allow_interspersed_args": False},
        epilog="Example: hpctrain submit --profile local --nodes 2 -- printenv SLURMD_NODENAME",
    )(submit)
