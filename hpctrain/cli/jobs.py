"""`hpctrain status | logs | cancel`: following and stopping submitted jobs."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hpctrain.cli import backends
from hpctrain.cli.output import console, err_console, is_tty, print_json
from hpctrain.errors import HpctrainError
from hpctrain.units import format_time

if TYPE_CHECKING:
    from hpctrain.history import JobRecord
    from hpctrain.jobs.tracking import RefreshReport

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output (docs/jobs.md).")]
JobIdsArg = Annotated[
    list[str] | None, typer.Argument(help="SLURM job ids (default: see the command's help).")
]

_STATE_STYLE = {
    "PENDING": "yellow", "RUNNING": "green", "COMPLETING": "green", "COMPLETED": "bold green",
    "FAILED": "bold red", "CANCELLED": "magenta", "TIMEOUT": "red", "OUT_OF_MEMORY": "red",
    "NODE_FAIL": "red", "BOOT_FAIL": "red", "DEADLINE": "red", "PREEMPTED": "magenta",
    "REQUEUED": "yellow", "SUSPENDED": "yellow", "UNKNOWN": "dim",
}


def fmt_duration(seconds: int | None) -> str:
    """SLURM's way: 5:02, 1:02:03, 1-02:03:04; '-' when unknown."""
    return "-" if seconds is None else format_time(seconds, compact=True)


def _info(r: JobRecord) -> str:
    """The column that says why: the pending reason, or how the job ended."""
    if r.terminal or r.state in ("COMPLETED", "FAILED", "TIMEOUT", "OUT_OF_MEMORY", "CANCELLED",
                                 "NODE_FAIL"):
        if r.exit_code is None:
            return ""
        return f"exit {r.exit_code}" + (f" (signal {r.signal})" if r.signal else "")
    return r.reason or ""


# NxGPU: nodes x GPUs per node. INFO: the pending reason, or the exit code once ended.
_COLUMNS = ("JOBID", "NAME", "PROFILE", "NxGPU", "STATE", "TIME/LIMIT", "NODELIST", "INFO")
# Above this many rows rich's table layout costs more than the refresh (0.5 s per 1,000).
_RICH_MAX_ROWS = 200


def _rows(records: list[JobRecord]) -> list[tuple[str, ...]]:
    from hpctrain.jobs.tracking import display_state

    return [
        (r.job_id, r.job_name, r.profile, f"{r.nodes}x{r.gpus_per_node}", display_state(r),
         f"{fmt_duration(r.elapsed_s)}/{fmt_duration(r.time_limit_s)}", r.node_list or "",
         _info(r))
        for r in records
    ]


def _table(records: list[JobRecord], caption: str | None = None) -> Any:
    from rich.markup import escape
    from rich.table import Table

    t = Table(caption=caption, caption_justify="left", pad_edge=False, box=None,
              header_style="bold")
    for col in _COLUMNS:
        # Ids, states and times must stay whole; free text folds when the terminal is narrow.
        free = col in ("NAME", "PROFILE", "NODELIST", "INFO")
        t.add_column(col, overflow="fold" if free else "ellipsis", no_wrap=not free)
    for r, row in zip(records, _rows(records), strict=True):
        style = "dim" if r.stale else _STATE_STYLE.get(r.state, "")
        # Names and reasons are user or SLURM text: never rich markup.
        cells = [escape(c) for c in row]
        if style:
            cells[4] = f"[{style}]{cells[4]}[/]"
        t.add_row(*cells)
    return t


def _plain_table(records: list[JobRecord]) -> str:
    """The same table as aligned plain text: for pipes and long listings."""
    rows = [_COLUMNS, *_rows(records)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ) + "\n"


def register(app: typer.Typer) -> None:
    """Add status, logs and cancel to the root app."""

    @app.command(epilog="Example: hpctrain status --watch")
    def status(
        job_ids: JobIdsArg = None,
        all_jobs: Annotated[
            bool, typer.Option("--all", "-a", help="Every job in the history.")
        ] = False,
        last: Annotated[
            int, typer.Option(min=0, help="Without --all or ids: unfinished jobs plus the last "
                              "N submitted.")
        ] = 20,
        watch: Annotated[
            bool, typer.Option("--watch", "-w", help="Refresh in place until Ctrl-C.")
        ] = False,
        interval: Annotated[
            float, typer.Option(min=1.0, help="Seconds between refreshes with --watch.")
        ] = 5.0,
        json_out: JsonOpt = False,
    ) -> None:
        """Show tracked jobs: unfinished ones and the last 20 (or the given ids, or --all)."""
        from hpctrain.jobs import tracking

        if watch and json_out:
            raise HpctrainError("--watch and --json do not mix", "run --json in a loop instead")
        history = backends.history()
        client, cluster = backends.slurm()

        def load() -> tuple[list[JobRecord], RefreshReport]:
            records = tracking.select(history, job_ids or [], all_jobs=all_jobs, last=last)
            return tracking.refresh(records, client, history, cluster)

        if not watch:
            records, report = load()
            if json_out:
                print_json({
                    "cluster": cluster or None,
                    "slurm_calls": report.calls,
                    "warnings": report.warnings,
                    "jobs": [tracking.job_dict(r) for r in records],
                })
                return
            for w in report.warnings:
                err_console.print(f"[yellow]warning:[/] {w}", highlight=False)
            if not records:
                err_console.print(
                    f"No jobs in the history ({history.path}); submit one with "
                    "`hpctrain submit --profile ...`.", highlight=False,
                )
                return
            if is_tty() and len(records) <= _RICH_MAX_ROWS:
                console.print(_table(records))
            else:
                sys.stdout.write(_plain_table(records))
            return
        _watch(load, interval)

    @app.command(epilog="Example: hpctrain logs -f")
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
    ) -> None:
        """Print a job's output file; with -f follow it until the job ends."""
        from hpctrain.jobs import logs as lg

        history = backends.history()
        record = lg.pick(history, job_id)
        path = lg.log_path(record, err)
        out = sys.stdout.buffer
        offset = 0
        if path.is_file():
            if tail is not None:
                data, offset = lg.tail_bytes(path, tail)
                out.write(data)
                out.flush()
        elif not follow:
            raise HpctrainError(
                f"job {record.job_id} has no output file yet ({path}); last state seen: "
                f"{record.state}",
                f"`hpctrain logs -f {record.job_id}` waits for it",
            )
        if not follow:
            if tail is None:
                _copy(path, out)
            return
        client, cluster = backends.slurm()
        if record.cluster != cluster:
            err_console.print(
                f"job {record.job_id} ran on cluster {record.cluster or '?'}, not this one "
                f"({cluster or '?'}): printing the file without following", highlight=False)
            if tail is None:
                _copy(path, out)
            return

        def write(data: bytes) -> None:
            out.write(data)
            out.flush()

        def note(text: str) -> None:
            err_console.print(f"[dim]{text}[/]", highlight=False)

        result = lg.follow(record, client, history, write, note, err=err, start_offset=offset)
        if not result.saw_file and not path.is_file():
            note(f"the job wrote no {'stderr' if err else 'output'} file ({path})")
        err_console.print(lg.final_line(result.record), highlight=False)

    @app.command(epilog="Example: hpctrain cancel 1234 1235")
    def cancel(
        job_ids: JobIdsArg = None,
        all_jobs: Annotated[
            bool, typer.Option("--all", help="Every unfinished job in the history.")
        ] = False,
        yes: Annotated[
            bool, typer.Option("--yes", "-y", help="Do not ask before cancelling --all.")
        ] = False,
        json_out: JsonOpt = False,
    ) -> None:
        """Cancel tracked jobs by id, or all unfinished ones with --all."""
        from hpctrain.jobs import tracking

        if bool(job_ids) == all_jobs:
            raise HpctrainError(
                "name the jobs to cancel, or pass --all (not both)",
                "e.g. `hpctrain cancel 1234` or `hpctrain cancel --all`",
            )
        history = backends.history()
        client, cluster = backends.slurm()
        if all_jobs:
            records = [r for r in history.unfinished() if r.cluster == cluster]
            if records and not yes:
                ids = ", ".join(r.job_id for r in records)
                if not sys.stdin.isatty():
                    raise HpctrainError(
                        f"refusing to cancel {len(records)} job(s) ({ids}) without confirmation",
                        "pass --yes to cancel them all from a script",
                    )
                typer.confirm(f"Cancel {len(records)} job(s): {ids}?", abort=True)
        else:
            records = tracking.select(history, job_ids or [])
        report = tracking.cancel(records, client, cluster)
        if json_out:
            print_json(report.as_dict())
            return
        for job, why in report.skipped.items():
            err_console.print(f"skipped {job}: {why}", highlight=False)
        if report.cancelled:
            console.print(f"Cancelled {', '.join(report.cancelled)}", highlight=False)
        elif not report.skipped:
            err_console.print("No unfinished jobs to cancel.", highlight=False)


def _copy(path: Path, out: Any) -> None:
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 16):
            out.write(chunk)
    out.flush()


def _watch(load: Any, interval: float) -> None:
    """Refresh the table in place until Ctrl-C; SLURM hiccups show up and do not end it."""
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    def frame() -> Any:
        stamp = time.strftime("%H:%M:%S")
        try:
            records, report = load()
        except HpctrainError as e:
            return Text(f"{stamp}  SLURM did not answer: {e}", style="red")
        caption = (f"{stamp}  every {interval:g} s, {report.calls} SLURM call(s); Ctrl-C quits"
                   + "".join(f"\nwarning: {w}" for w in report.warnings))
        return _table(records, caption=caption)

    try:
        with Live(frame(), console=Console(), auto_refresh=False, transient=False) as live:
            while True:
                time.sleep(interval)
                live.update(frame(), refresh=True)
    except KeyboardInterrupt:
        pass
