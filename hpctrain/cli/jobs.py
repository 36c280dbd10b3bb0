"""`hpctrain status | logs | cancel`: following and stopping submitted jobs."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, BinaryIO

import typer

from hpctrain.cli import backends
from hpctrain.cli.options import LoginOpt
from hpctrain.cli.output import console, err_console, print_json
from hpctrain.errors import HpctrainError

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord
    from hpctrain.places import Place
    from hpctrain.remote.connection import Connection
    from hpctrain.tracking.byplace import Refreshed
    from hpctrain.tracking.watcher import CancelReport, JobWatcher

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output (docs/jobs.md).")]
StudyOpt = Annotated[str | None, typer.Option(
    "--study", metavar="NAME", help="A study's jobs: a sweep's points, a scaling study's runs "
    "(by name or id).")]
JobIdsArg = Annotated[
    list[str] | None, typer.Argument(help="SLURM job ids (default: see the command's help).")
]
_COPY_CHUNK = 1 << 16


def _watcher(history: History, place: Place | None = None, known: str = "") -> JobWatcher:
    """The job watcher for this cluster's SLURM, or a login's (`place`)."""
    from hpctrain.tracking import byplace as watchers

    return watchers.watcher(history, place or backends.local_place(), known)


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
    from hpctrain.tracking import byplace as watchers
    from hpctrain.tracking import selection as tracking

    if watch and json_out:
        raise HpctrainError("--watch and --json do not mix", "run --json in a loop instead")
    _check_login(login)
    history = backends.history()

    def select() -> list[JobRecord]:
        return tracking.listing(history, job_ids or [], all_jobs=all_jobs, last=last,
                                study=study)

    if not watch and not (records := select()):
        # Nothing to refresh: SLURM is not asked (a login node answers `status` at once).
        jobview.show_status(watchers.Refreshed.unasked(records), json_out, history.path)
        return

    def load() -> Refreshed:
        from hpctrain.tracking.why import verdicts

        local = backends.local_place()
        got = watchers.refresh(history, local, select(), login)
        listed = tracking.as_listed(history, verdicts(history, got.records, local), study)
        return dataclasses.replace(got, records=listed)

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


def _copy(path: Path, out: BinaryIO) -> None:
    with open(path, "rb") as fh:
        while chunk := fh.read(_COPY_CHUNK):
            out.write(chunk)
    out.flush()


def _write(out: BinaryIO, data: bytes) -> None:
    out.write(data)
    out.flush()


def _note(text: str) -> None:
    err_console.print(f"[dim]{text}[/]", highlight=False)


def _print_start(record: JobRecord, path: Path, tail: int | None, follow: bool) -> int:
    """Print the file (or its last `tail` lines) as it is now; return where following starts."""
    from hpctrain.files import tail_bytes

    out = sys.stdout.buffer
    if not path.is_file():
        if not follow:
            raise HpctrainError(
                f"job {record.job_id} has no output file yet ({path}); last state seen: "
                f"{record.state}",
                f"`hpctrain logs -f {record.job_id}` waits for it",
            )
        return 0
    if tail is not None:
        data, offset = tail_bytes(path, tail)
        _write(out, data)
        return offset
    if not follow:
        _copy(path, out)
    return 0


def _follow(watcher: JobWatcher, record: JobRecord, path: Path, offset: int, err: bool,
            tail: int | None) -> None:
    """Follow the file while the job runs (on this cluster), then say how the job ended."""
    from hpctrain.cli.jobview import final_line
    from hpctrain.tracking import logs as lg

    out = sys.stdout.buffer
    if record.cluster != watcher.cluster or not watcher.cluster:
        if watcher.cluster:
            err_console.print(
                f"job {record.job_id} ran on cluster {record.cluster or '?'}, not this one "
                f"({watcher.cluster}): printing the file without following", highlight=False)
        if tail is None and path.is_file():
            _copy(path, out)
        watcher.require_cluster()
        return
    from hpctrain.tracking.filewait import waiter_for

    waiter = waiter_for(path)
    try:
        result = lg.follow(record, watcher, lambda data: _write(out, data), _note, err=err,
                           start_offset=offset, waiter=waiter)
    finally:
        waiter.close()
    if not result.saw_file and not path.is_file():
        _note(f"the job wrote no {'stderr' if err else 'output'} file ({path})")
    err_console.print(final_line(result.record), highlight=False)


def _remote_logs(history: History, conn: Connection, record: JobRecord, err: bool,
                 tail: int | None, follow: bool) -> None:
    """logs over the login's master: the file as it is, then (-f) what it gains until the end."""
    from hpctrain.cli.jobview import final_line
    from hpctrain.remote import site as sites
    from hpctrain.tracking import logs as lg

    out, path = sys.stdout.buffer, lg.log_path(record, err)
    conn.require()
    offset = 0
    if tail is not None or not follow:
        got = sites.read_file(conn, path, tail)
        if got is None and not follow:
            raise HpctrainError(
                f"job {record.job_id} has no output file yet ({conn.target.host}:{path}); "
                f"last state seen: {record.state}",
                f"`hpctrain logs -f {record.job_id}` waits for it")
        if got is not None:
            _write(out, got[0])
            offset = got[1]
    if not follow:
        return
    follower = sites.RemoteFollower(conn, path, offset)
    from hpctrain.places.login import LoginPlace

    watcher = _watcher(history, LoginPlace(conn), record.cluster)
    result = lg.follow(record, watcher, lambda data: _write(out, data), _note, err=err,
                       follower=follower, poll_s=sites.REMOTE_FILE_POLL_S)
    if not result.saw_file:
        _note(f"the job wrote no {'stderr' if err else 'output'} file ({path}) so far")
    err_console.print(final_line(result.record), highlight=False)


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
    """Print a job's output file; with -f follow it until the job ends."""
    from hpctrain.remote.site import record_connection
    from hpctrain.tracking import logs as lg
    from hpctrain.tracking import selection as tracking

    history = backends.history()
    record = tracking.pick(history, job_id)
    conn = record_connection(record, login)
    if conn is not None:
        _remote_logs(history, conn, record, err, tail, follow)
        return
    path = lg.log_path(record, err)
    offset = _print_start(record, path, tail, follow)
    if follow:
        _follow(_watcher(history), record, path, offset, err, tail)


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
    from hpctrain.tracking import byplace as watchers
    from hpctrain.tracking import selection as tracking
    from hpctrain.tracking.watcher import CancelReport

    if sum((bool(job_ids), all_jobs, study is not None)) != 1:
        raise HpctrainError(
            "name the jobs to cancel, a --study, or pass --all (one of them)",
            "e.g. `hpctrain cancel 1234`, `hpctrain cancel --study lr-bs` or "
            "`hpctrain cancel --all`",
        )
    _check_login(login)
    history = backends.history()
    if all_jobs and login is not None:
        # --all --login DEST: the unfinished jobs submitted through that login.
        records = [r for r in history.unfinished() if r.login == login]
        _confirm_all(records, yes)
    elif all_jobs:
        mine = [r for r in history.unfinished() if not r.login]
        if not mine:
            # Nothing to cancel needs no SLURM, nor a slurm.conf to say which cluster this is.
            return _print_cancelled(CancelReport(), json_out)
        cluster = _watcher(history).cluster
        records = [r for r in mine if r.cluster == cluster]
        _confirm_all(records, yes)
    elif study is not None:
        records = tracking.study_points(history, study)
    else:
        # A job of a chain stands for the whole run: its pending segments go too.
        records = tracking.with_races(history, tracking.with_chains(
            history, tracking.select(history, job_ids or [])))
    # A whole sweep goes by its arrays' ids: one scancel however many points it has.
    _print_cancelled(watchers.cancel(history, backends.local_place(), records,
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
