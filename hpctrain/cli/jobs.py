"""`hpctrain status | logs | cancel`: following and stopping submitted jobs."""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, BinaryIO

import typer

from hpctrain.cli import backends
from hpctrain.cli.flags import JsonOpt
from hpctrain.cli.login import LoginOpt
from hpctrain.cli.output import console, err_console, print_json
from hpctrain.errors import HpctrainError

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord
    from hpctrain.places import Place
    from hpctrain.tracking.overview import Overview
    from hpctrain.tracking.report import Refreshed
    from hpctrain.tracking.watcher import CancelReport, JobWatcher

StudyOpt = Annotated[str | None, typer.Option(
    "--study", metavar="NAME", help="A study's jobs: a sweep's points, a scaling study's runs "
    "(by name or id).")]
JobIdsArg = Annotated[
    list[str] | None, typer.Argument(help="SLURM job ids (default: see the command's help).")
]


def _watcher(history: History, place: Place | None = None, known: str = "") -> JobWatcher:
    """The job watcher for this cluster's SLURM, or a login's (`place`)."""
    from hpctrain.tracking import byplace

    return byplace.watcher(history, place or backends.local_place(), known)


def _check_login(login: str | None) -> None:
    """--login DEST must be a destination, never an ssh option or shell words."""
    if login is not None:
        from hpctrain.remote.connection import check_destination

        check_destination(login)


def status(
    job_ids: JobIdsArg = None,
    all_jobs: Annotated[
        bool, typer.Option("--all", "-a", help="Every job in the history.")
    ] = False,
    last: Annotated[
        int, typer.Option(min=0, help="Without --all or ids: unfinished jobs plus the last "
                          "N submitted.")
    ] = 20,
    login: LoginOpt = None,
    watch: Annotated[
        bool, typer.Option("--watch", "-w", help="Refresh in place until Ctrl-C.")
    ] = False,
    interval: Annotated[
        float, typer.Option(min=1.0, help="Seconds between refreshes with --watch.")
    ] = 5.0,
    study: StudyOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show tracked jobs: unfinished ones and the last 20 (or the given ids, or --all); a
    sweep's points as one row (--study NAME: its points)."""
    from hpctrain.cli import jobview
    from hpctrain.tracking import selection

    if watch and json_out:
        raise HpctrainError("--watch and --json do not mix", "run --json in a loop instead")
    _check_login(login)
    history = backends.history()

    def select() -> list[JobRecord]:
        return selection.listing(history, job_ids or [], all_jobs=all_jobs, last=last,
                                study=study)

    load = _loader(history, select, login, study, overview=not watch)
    if watch:
        jobview.watch(load, interval)
        return
    got = load()
    jobview.show_status(got, json_out, history.path)
    if got.report.error:
        # After the listing: the last known states are shown, then why they are not fresh.
        error = jobview.unanswered(got.report.error)
        error.shown_in_json = json_out  # the listing's JSON holds it as `error`
        raise error


def _loader(history: History, select: Callable[[], list[JobRecord]], login: str | None,
            study: str | None, overview: bool) -> Callable[[], Refreshed]:
    """What one look at the selected jobs does: refresh them where SLURM must be asked, judge
    those newly ended, list them as status shows them (`overview`: with one job's overview,
    which --watch's table does not show)."""
    from hpctrain.tracking import selection

    # Made once, and only when a job is asked about or judged.
    local = functools.cache(backends.local_place)

    def load() -> Refreshed:
        from hpctrain.tracking.report import Refreshed

        records = select()
        # --login DEST shows only the jobs through it: their places pick them.
        if login is not None or not all(r.terminal for r in records):
            from hpctrain.tracking import byplace

            got = byplace.refresh(history, local(), records, login)
        else:
            # Every job listed has ended as far as the history knows: SLURM is not asked,
            # and nothing that would ask it is imported (a login node answers at once).
            got = Refreshed.unasked(records)
        learned = _races_learned(history, _judged(history, got.records, local), local)
        listed = selection.as_listed(history, learned, study)
        if not overview:
            return dataclasses.replace(got, records=listed)
        return dataclasses.replace(got, records=listed, overview=_overview(listed, local, got))

    return load


def _overview(records: list[JobRecord], local: Callable[[], Place], got: Refreshed
              ) -> Overview | None:
    """One job listed: its run directory's overview, from its login if it went through one (a
    login that cannot be read is a warning: the listing stands)."""
    if len(records) != 1:
        return None
    from hpctrain import places
    from hpctrain.tracking import overview

    try:
        return overview.of_record(records[0], places.place_for(records[0], local()))
    except HpctrainError as e:
        if got.report.error is None:  # else that error says it already
            got.report.warnings.append(str(e))
        return None


def _races_learned(history: History, records: list[JobRecord], local: Callable[[], Place]
                   ) -> list[JobRecord]:
    """The records, each race's winner learned where it is not yet (tracking/races.py); a
    login that cannot be asked now is asked by a later status (the listing stands)."""
    from hpctrain.tracking.selection import races_unlearned

    if not races_unlearned(records):
        return records
    from hpctrain.tracking import races

    try:
        return races.learn(history, records, local())
    except HpctrainError:
        return records


def _judged(history: History, records: list[JobRecord], local: Callable[[], Place]
            ) -> list[JobRecord]:
    """The records, those that ended since the last status with their verdicts made now."""
    if not any(r.unjudged for r in records):
        return records
    # The diagnosis is imported only then: most listings have no newly ended job.
    from hpctrain.tracking.why import verdicts

    return verdicts(history, records, local())


def _write(out: BinaryIO, data: bytes) -> None:
    out.write(data)
    out.flush()


def _note(text: str) -> None:
    err_console.print(f"[dim]{text}[/]", highlight=False)


def _print_start(place: Place, record: JobRecord, path: Path, tail: int | None,
                 follow: bool) -> int:
    """Print the file (or its last `tail` lines) as it is now; return where following starts."""
    if follow and tail is None:
        return 0
    got = place.read_file(path, tail)
    if got is None:
        if not follow:
            raise HpctrainError(
                f"job {record.job_id} has no output file yet ({place.shown(path)}); last state "
                f"seen: {record.state}",
                f"`hpctrain logs -f {record.job_id}` waits for it",
            )
        return 0
    _write(sys.stdout.buffer, got[0])
    return got[1]


def _follow(place: Place, history: History, record: JobRecord, path: Path, offset: int,
            err: bool, tail: int | None) -> bool:
    """Follow the file at the job's place while the job runs (on the cluster the place's SLURM
    talks to), then say how the job ended; True when it COMPLETED (or is not followed)."""
    from hpctrain.cli.jobview import final_line
    from hpctrain.slurm.states import JobState, parse_state
    from hpctrain.tracking import logs as lg

    out = sys.stdout.buffer
    watcher = _watcher(history, place, record.cluster)
    if record.cluster != watcher.cluster or not watcher.cluster:
        if watcher.cluster:
            err_console.print(
                f"job {record.job_id} ran on cluster {record.cluster or '?'}, not this one "
                f"({watcher.cluster}): printing the file without following", highlight=False)
        if tail is None and (got := place.read_file(path, None)) is not None:
            _write(out, got[0])
        watcher.require_cluster()
        return True
    result = lg.follow_at(place, record, watcher, lambda data: _write(out, data), _note,
                          err=err, start_offset=offset)
    if not result.saw_file and place.read_file(path, 0) is None:
        _note(f"the job wrote no {'stderr' if err else 'output'} file ({place.shown(path)})")
    err_console.print(final_line(result.record), highlight=False)
    return parse_state(result.record.state) is JobState.COMPLETED and not result.record.stale


def logs(
    job_id: Annotated[
        str | None, typer.Argument(help="SLURM job id (default: the last job submitted).")
    ] = None,
    follow: Annotated[
        bool,
        typer.Option("--follow", "-f", help="Wait while pending, follow the file, stop "
                     "when the job ends."),
    ] = False,
    err: Annotated[bool, typer.Option("--err", help="The job's stderr file.")] = False,
    tail: Annotated[
        int | None, typer.Option("--tail", "-n", min=0, help="Start with the last N lines.")
    ] = None,
    login: LoginOpt = None,
) -> None:
    """Print a job's output file; with -f follow it until the job ends (exit 1 unless COMPLETED)."""
    from hpctrain.tracking import logs as lg
    from hpctrain.tracking import selection

    history = backends.history()
    record = selection.pick(history, job_id)
    # Where the job was submitted through (--login DEST: read it over that login instead).
    place = backends.place_for(record, login)
    path = lg.log_path(record, err)
    place.check()
    offset = _print_start(place, record, path, tail, follow)
    if follow and not _follow(place, history, record, path, offset, err, tail):
        # `hpctrain logs -f JOB && next` goes on only after a job that did its work.
        raise typer.Exit(1)


def _confirm_all(records: list[JobRecord], yes: bool) -> None:
    """cancel --all asks first; a script must say --yes."""
    if not records or yes:
        return
    ids = ", ".join(r.job_id for r in records)
    if not sys.stdin.isatty():
        raise HpctrainError(
            f"refusing to cancel {len(records)} job(s) ({ids}) without confirmation",
            "pass --yes to cancel them all from a script",
        )
    typer.confirm(f"Cancel {len(records)} job(s): {ids}?", abort=True)


def _all_unfinished(history: History, login: str | None) -> list[JobRecord]:
    """cancel --all: the unfinished jobs submitted here (--login DEST: through that login)
    that run on the cluster its SLURM talks to."""
    from hpctrain import places

    mine = places.submitted_through(history.unfinished(), login)
    if not mine:
        return []
    watcher = _watcher(history, backends.place_for(mine[0], login), mine[0].cluster)
    # Unknown, every job would look like another cluster's: say so rather than cancel none.
    watcher.require_cluster()
    return [r for r in mine if r.cluster == watcher.cluster]


def cancel(
    job_ids: JobIdsArg = None,
    all_jobs: Annotated[
        bool, typer.Option("--all", help="Every unfinished job in the history.")
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask before cancelling --all.")
    ] = False,
    login: LoginOpt = None,
    study: StudyOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Cancel tracked jobs by id (a chain's or a race's job: all of it), a sweep
    (--study NAME: all its arrays), or all with --all."""
    from hpctrain.tracking import byplace, selection
    from hpctrain.tracking.watcher import CancelReport

    if sum((bool(job_ids), all_jobs, study is not None)) != 1:
        raise HpctrainError(
            "name the jobs to cancel, a --study, or pass --all (one of them)",
            "e.g. `hpctrain cancel 1234`, `hpctrain cancel --study lr-bs` or "
            "`hpctrain cancel --all`",
        )
    _check_login(login)
    history = backends.history()
    if all_jobs:
        records = _all_unfinished(history, login)
        if not records:
            # Nothing to cancel needs no SLURM, nor a slurm.conf to say which cluster this is.
            return _print_cancelled(CancelReport(), json_out)
        _confirm_all(records, yes)
    elif study is not None:
        records = selection.study_points(history, study)
    else:
        # A job of a chain stands for the whole run: its pending segments go too.
        records = selection.with_races(history, selection.with_chains(
            history, selection.select(history, job_ids or [])))
    # A whole sweep goes by its arrays' ids: one scancel however many points it has.
    _print_cancelled(byplace.cancel(history, backends.local_place(), records,
                                     arrays=study is not None), json_out)


def _print_cancelled(report: CancelReport, json_out: bool) -> None:
    if json_out:
        print_json(report.as_dict())
        return
    for job, why in report.skipped.items():
        err_console.print(f"skipped {job}: {why}", highlight=False)
    if report.cancelled:
        console.print(f"Cancelled {', '.join(report.cancelled)}", highlight=False)
    elif not report.skipped:
        err_console.print("No unfinished jobs to cancel.", highlight=False)


def register(app: typer.Typer) -> None:
    """Add status, logs and cancel to the root app."""
    app.command(epilog="Example: hpctrain status --watch")(status)
    app.command(epilog="Example: hpctrain logs -f")(logs)
    app.command(epilog="Example: hpctrain cancel 1234 1235")(cancel)
