"""`hpctrain submit`: prepare a job as a value, then show it (--dry-run) or execute it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hpctrain.cli import argv, backends
from hpctrain.cli.display import DRY_RUN, show
from hpctrain.cli.flags import JSON, LOGIN, Flags
from hpctrain.cli.options import JobOptions, Row, build_request, job_command
from hpctrain.cli.race import FIRST_OF

if TYPE_CHECKING:
    import typer

    from hpctrain.plan import JobRequest

# submit's own options, after the job's and the trainer's (cli/options.py).
OWN = (
    Row("chain", int, 1, Flags(("--chain",), "Queue N jobs, each after the one before, sharing "
                               "one run directory: a long training carried on past the time "
                               "limit.")),
    Row("after", str | None, None, Flags(("--after",), "Start only after these jobs ended well "
                                         "(afterok), e.g. --after 1234,1235.")),
    Row("login", str | None, None, LOGIN),
    Row("first_of", str | None, None, FIRST_OF),
    Row("snapshot", bool, True, Flags(
        ("--snapshot/--no-snapshot",), "Run the project as it is now, frozen into a snapshot "
        "(default), or run it in place, as it will be when the job starts (docs/jobs.md, "
        "\"Code snapshots\").")),
    Row("in_place", list[str] | None, None, Flags(
        ("--in-place",), "A project path (data) the job reads where it is instead of from the "
        "snapshot; repeat for more.", metavar="PATH")),
    Row("dry_run", bool, False, DRY_RUN),
    Row("json_out", bool, False, JSON),
)


def run_plain(args: Sequence[str]) -> bool:
    """Run `submit ARGS` where its command line needs no click (cli/argv.py); False: it does."""
    return argv.run_job(args, OWN, submit)


def submit(
    job: JobOptions, chain: int = 1, after: str | None = None, login: str | None = None,
    first_of: str | None = None, snapshot: bool = True, in_place: list[str] | None = None,
    dry_run: bool = False, json_out: bool = False,
) -> None:
    """Submit a job: render it, create its run directory, sbatch it and record it."""
    from dataclasses import replace

    from hpctrain.startup import ahead

    if in_place and not snapshot:
        from hpctrain.errors import HpctrainError

        raise HpctrainError("--in-place names data to leave out of the snapshot, and "
                            "--no-snapshot makes none", "drop one of the two")
    after_ids = tuple(a.strip() for a in (after or "").split(",") if a.strip())
    settings: dict[str, Any] = {"chain": chain, "after": after_ids, "snapshot": snapshot,
                                "in_place": tuple(in_place or ())}
    request = replace(build_request(job), **settings)
    if first_of and "@" in first_of and _across(job, request, settings, first_of, login,
                                               dry_run, json_out):
        return
    place = backends.place_for(request.profile, login, job.python_env)
    with ahead.scope():
        # Its questions run while the submission's modules are imported (hpctrain/startup/ahead.py).
        place.ask_ahead(request, acting=not dry_run)
        from hpctrain.submission.kinds import Kind, submission
        from hpctrain.submission.pipeline import run
        from hpctrain.submission.questions import before_submit

        history = backends.history()
        request = before_submit(request, place, history)
        kind: Kind[Any, Any] = submission(request, first_of)
        show(run(kind, place, history, dry_run), place, json_out)


def _across(job: JobOptions, request: JobRequest, settings: dict[str, Any], first_of: str,
            login: str | None, dry_run: bool, json_out: bool) -> bool:
    """A race across profiles (submission/crossrace.py), shown; False: `first_of` names the
    -P profile's alone."""
    from dataclasses import replace

    from hpctrain.submission.crossrace import across
    from hpctrain.submission.pipeline import run

    history = backends.history()
    local = backends.local_place()
    kind = across(first_of, request,
                  lambda name: replace(build_request(replace(job, profile=name)), **settings),
                  local, login, job.python_env, history)
    if kind is None:
        return False
    show(run(kind, local, history, dry_run), local, json_out)
    return True


def register(app: typer.Typer) -> None:
    """Add submit to the root app."""
    app.command(
        name="submit", context_settings={"allow_interspersed_args": False},
        epilog="Example: hpctrain submit --profile local --nodes 2 -- printenv SLURMD_NODENAME",
    )(job_command(__name__, "submit", OWN))
