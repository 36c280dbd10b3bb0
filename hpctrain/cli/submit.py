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
# `--like-dev JOB` takes the request from the dev job: only these of the job's options change it.
LIKE_DEV = Row("like_dev", str | None, None, Flags(
    ("--like-dev",), "Submit what dev job JOB holds (`hpctrain dev`) as a batch job, with the "
    "project as it is now; --nodes, --gpus-per-node and --time change it (docs/dev.md).",
    metavar="JOB"))


def run_plain(args: Sequence[str]) -> bool:
    """Run `submit ARGS` where its command line needs no click (cli/argv.py); False: it does."""
    if any(a == "--like-dev" or a.startswith("--like-dev=") for a in args):
        # No --profile to require: the dev job's run directory keeps it.
        return _like_dev_plain(args)
    return argv.run_job(args, (*OWN, LIKE_DEV), submit)


def _like_dev_plain(args: Sequence[str]) -> bool:
    from hpctrain.cli.options import job_table

    changing = [r for r in job_table() if r.name in ("nodes", "gpus_per_node", "time")]
    own = [LIKE_DEV, *(r for r in OWN if r.name in ("dry_run", "json_out"))]
    parsed = argv.parse(args, [*changing, *own])
    if parsed is None or parsed[1]:
        return False
    values = parsed[0]
    submit_like_dev(values["like_dev"], values.get("nodes"), values.get("gpus_per_node"),
             values.get("time"), values.get("dry_run", False), values.get("json_out", False))
    return True


def submit_like_dev(job_id: str, nodes: int | None = None, gpus_per_node: int | None = None,
             time: str | None = None, dry_run: bool = False, json_out: bool = False) -> None:
    """`submit --like-dev JOB`: the dev job's request as a batch job (submission/dev.py)."""
    from hpctrain.submission import dev
    from hpctrain.submission.pipeline import run
    from hpctrain.submission.rerun import Changes
    from hpctrain.tracking import selection

    history = backends.history()
    record = selection.pick(history, job_id)
    place = backends.place_for(record)
    kind = dev.like_dev(record, place, Changes(nodes, gpus_per_node, time), history)
    show(run(kind, place, history, dry_run), place, json_out)


def submit(
    job: JobOptions, chain: int = 1, after: str | None = None, login: str | None = None,
    first_of: str | None = None, snapshot: bool = True, in_place: list[str] | None = None,
    dry_run: bool = False, json_out: bool = False, like_dev: str | None = None,
) -> None:
    """Submit a job: render it, create its run directory, sbatch it and record it."""
    from dataclasses import replace

    if like_dev is not None:
        submit_like_dev(like_dev, dry_run=dry_run, json_out=json_out)
        return

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
    )(job_command(__name__, "submit", (*OWN, LIKE_DEV)))
