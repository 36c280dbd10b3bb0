"""How tracked jobs look: the status table (rich or plain), the --json shape, the end line."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from hpctrain.cli.output import console, err_console, is_tty, plain_columns, print_json
from hpctrain.errors import HpctrainError
from hpctrain.slurm.states import ENDED, RUNNING, JobState, StateGroup, parse_state
from hpctrain.values.units import format_time

if TYPE_CHECKING:
    from pathlib import Path

    from hpctrain.diagnosis.startup import Startup
    from hpctrain.history import JobRecord
    from hpctrain.tracking.overview import Overview
    from hpctrain.tracking.report import Refreshed

    Load = Callable[[], Refreshed]

_GROUP_STYLE = {
    StateGroup.PENDING: "yellow", StateGroup.RUNNING: "green", StateGroup.ENDED: "bold green",
    StateGroup.FAILED: "red", StateGroup.UNKNOWN: "dim",
}
# Ended by someone's decision rather than by a fault of the job.
_STATE_STYLE = {JobState.FAILED: "bold red", JobState.CANCELLED: "magenta",
                JobState.PREEMPTED: "magenta"}
# NxGPU: nodes x GPUs per node. INFO: the pending reason, or the exit code once ended.
_COLUMNS = ("JOBID", "NAME", "PROFILE", "NxGPU", "STATE", "TIME/LIMIT", "NODELIST", "INFO")
# Ids, states and times must stay whole; free text folds when the terminal is narrow.
_FREE_TEXT = ("NAME", "PROFILE", "NODELIST", "INFO")
_NAME_COLUMN = _COLUMNS.index("NAME")
_STATE_COLUMN = _COLUMNS.index("STATE")
# Above this many rows rich's table layout costs more than the refresh (0.5 s per 1,000).
_RICH_MAX_ROWS = 200


def fmt_duration(seconds: int | None) -> str:
    """SLURM's way: 5:02, 1:02:03, 1-02:03:04; '-' when unknown."""
    return "-" if seconds is None else format_time(seconds, compact=True)


def display_state(record: JobRecord) -> str:
    """The state as shown to people: `RUNNING`, or `RUNNING?` when it is the last one seen."""
    state = parse_state(record.state).value
    return f"{state}?" if record.stale else state


def final_line(record: JobRecord) -> str:
    """`job 12 COMPLETED (exit 0)`: how `logs -f` reports the end."""
    state = parse_state(record.state)
    text = f"job {record.job_id} {state.value}{'?' if record.stale else ''}"
    if record.exit_code is not None and state is not JobState.COMPLETED:
        text += f" (exit code {record.exit_code}"
        text += f", signal {record.signal})" if record.signal else ")"
    elif state is JobState.PENDING and record.reason:
        text += f" ({record.reason})"
    return text


def job_dict(record: JobRecord) -> dict[str, object]:
    """One job in the documented --json shape (docs/jobs.md)."""
    from hpctrain.tracking.selection import restarts

    return {
        "job_id": record.job_id, "cluster": record.cluster, "name": record.job_name,
        "profile": record.profile, "partition": record.partition, "nodes": record.nodes,
        "gpus_per_node": record.gpus_per_node, "total_gpus": record.total_gpus,
        "state": record.state, "slurm_state": record.slurm_state,
        "terminal": record.terminal, "stale": record.stale, "reason": record.reason,
        "exit_code": record.exit_code, "signal": record.signal,
        "node_list": record.node_list, "elapsed_s": record.elapsed_s,
        "time_limit_s": record.time_limit_s, "submitted_at": record.submitted_at,
        "updated_at": record.updated_at, "run_dir": record.run_dir,
        "script": record.script_path, "stdout": record.stdout_path,
        "stderr": record.stderr_path, "workdir": record.workdir, "command": record.command,
        "git_commit": record.git_commit, "git_dirty": record.git_dirty,
        "snapshot": record.snapshot, "login": record.login, "restarts": restarts(record),
        "verdict": record.verdict,
        # A sweep's point, or (a row standing for a whole sweep) the sweep: its study's id.
        "study": record.study,
        "chain": None if record.chain_head is None else {
            "head": record.chain_head, "segment": record.segment, "segments": record.segments},
        "race": _race_dict(record),
    }


def _race_dict(record: JobRecord) -> dict[str, object] | None:
    """A --first-of alternative: the race's first id, its topologies, who claimed the run."""
    if record.race_head is None:
        return None
    from hpctrain.tracking.selection import winner

    won = winner(record)
    return {"head": record.race_head, "first_of": record.race_of,
            "topology": f"{record.nodes}x{record.gpus_per_node}",
            "winner": won[0] if won else None, "winner_topology": won[1] if won else None}


def one_row_per_chain(records: list[JobRecord]) -> list[JobRecord]:
    """A chain's jobs as one row: the segment running (or next to run, or the last one).

    A race's alternatives (--first-of) become one row too: the winner's.
    """
    from hpctrain.tracking.selection import one_row_per_race

    shown: dict[tuple[str, str], JobRecord] = {}
    out: list[JobRecord] = []
    for r in one_row_per_race(records):
        if r.chain_head is None:
            out.append(r)
            continue
        key = (r.cluster, r.chain_head)
        if key not in shown:
            out.append(r)
        elif _chain_rank(r) < _chain_rank(shown[key]):
            out[out.index(shown[key])] = r
        else:
            continue
        shown[key] = r
    return out


def _chain_rank(r: JobRecord) -> tuple[int, int]:
    running = parse_state(r.state) in RUNNING
    # Running first, then the earliest unfinished, then the latest finished.
    order = 0 if running else 1 if not r.terminal else 2
    return order, (r.segment or 0) * (1 if order < 2 else -1)


def _info(r: JobRecord, starts: Mapping[str, str | None] | None = None) -> str:
    """The column that says why: the pending reason, or how the job ended; and its requeues."""
    from hpctrain.tracking.selection import restarts

    count = restarts(r)
    start = _expected(r, starts)
    return ", ".join(p for p in (_why(r), start, f"requeued {count}x" if count else "") if p)


def _expected(r: JobRecord, starts: Mapping[str, str | None] | None) -> str:
    """`start in 5 min (...)`: SLURM's expected start of a pending job (`squeue --start`)."""
    start = (starts or {}).get(r.job_id)
    if start is None or parse_state(r.state) is not JobState.PENDING:
        return ""
    from datetime import datetime

    from hpctrain.slurm.starts import describe

    return f"start {describe(start, datetime.now())}"


def _why(r: JobRecord) -> str:
    # The exit code shows as soon as SLURM says the job ended, before it is cached; then
    # `hpctrain why`'s verdict in a few words, where something went wrong.
    if r.terminal or parse_state(r.state) in ENDED:
        if r.verdict:
            return r.verdict
        if r.exit_code is None or (r.verdict == "" and not r.exit_code):
            return ""
        return f"exit {r.exit_code}" + (f" (signal {r.signal})" if r.signal else "")
    if not r.reason:
        return ""
    from hpctrain.diagnosis.pending import short_reason

    words = short_reason(r.reason)
    return f"{r.reason}: {words}" if words else r.reason


def _name(r: JobRecord) -> str:
    if r.race_of is not None:
        race = _race_dict(r) or {}
        won = "won" if race.get("winner") == r.job_id else "first"
        return f"{r.job_name} [{won} of {r.race_of}]"
    return r.job_name if r.chain_head is None else f"{r.job_name} [{r.segment}/{r.segments}]"


def _rows(records: list[JobRecord], starts: Mapping[str, str | None] | None = None
          ) -> list[tuple[str, ...]]:
    return [
        (r.job_id, _name(r), r.profile, f"{r.nodes}x{r.gpus_per_node}", display_state(r),
         f"{fmt_duration(r.elapsed_s)}/{fmt_duration(r.time_limit_s)}", r.node_list or "",
         _info(r, starts))
        for r in records
    ]


def table(records: list[JobRecord], caption: str | None = None,
          starts: Mapping[str, str | None] | None = None) -> Any:
    """The jobs as a rich table, states coloured, user and SLURM text never read as markup."""
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    t = Table(caption=caption, caption_justify="left", pad_edge=False, box=None,
              header_style="bold")
    for col in _COLUMNS:
        free = col in _FREE_TEXT
        t.add_column(col, overflow="fold" if free else "ellipsis", no_wrap=not free)
    for r, row in zip(records, _rows(records, starts), strict=True):
        style = "dim" if r.stale else _style(parse_state(r.state))
        cells: list[Any] = [escape(c) for c in row]
        if style:
            cells[_STATE_COLUMN] = f"[{style}]{cells[_STATE_COLUMN]}[/]"
        # A name gives way first when the terminal is narrow (as free text does), but is cut
        # short with an ellipsis: folded over two lines it reads as two jobs.
        cells[_NAME_COLUMN] = Text(row[_NAME_COLUMN], no_wrap=True, overflow="ellipsis")
        t.add_row(*cells)
    return t


def _style(state: JobState) -> str:
    return _STATE_STYLE.get(state) or _GROUP_STYLE[state.group]


def plain_table(records: list[JobRecord], starts: Mapping[str, str | None] | None = None
                ) -> str:
    """The same table as aligned plain text: for pipes and long listings."""
    return plain_columns(_COLUMNS, _rows(records, starts))


# diagnosis/startup.py's headline for a job without a rank's marks ends in "yet": of an ended
# job it reads as if the job were still starting. Only the packaged trainer marks a rank's start.
ENDED_UNMARKED = "start-up: the program marked no start (only the packaged trainer marks it)"


def startup_lines(startup: Startup, ended: bool) -> list[str]:
    """The start-up's lines, with a headline that is true of an ended job of one's own script."""
    lines = startup.lines()
    if lines:
        lines[0] = startup_headline(startup, ended)
    return lines


def startup_headline(startup: Startup, ended: bool) -> str:
    """The start-up's headline, true of an ended job of one's own script too."""
    return ENDED_UNMARKED if ended and not startup.ranks else startup.headline()


def code_line(record: JobRecord) -> str:
    """Which code a job runs: its snapshot, or the project in place (--no-snapshot)."""
    if record.snapshot:
        return f"code: snapshot {record.snapshot} of {record.workdir}"
    return (f"code: {record.workdir} in place, as it was when the job started (no snapshot: "
            "--no-snapshot, or submitted before snapshots)")


def attempt_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The job's attempts as status and why show them (none: no line; one: no restart)."""
    from hpctrain.values.attempts import Attempt, describe

    if len(rows) < 2:
        return []
    return ["attempts inside the job (--restarts):",
            *(f"  {line}" for line in describe([Attempt(**r) for r in rows]))]


def _show_overview(record: JobRecord, overview: Overview | None) -> None:
    # One job asked for by id: its monitor summary, attempts and start-up follow (`hpctrain
    # stats` has them all).
    if overview is None:
        return
    lines = []
    if overview.monitor is not None:
        from hpctrain.monitor.stats import status_lines

        lines += ["monitor (hpctrain stats for more):", *status_lines(overview.monitor)]
    lines += attempt_lines(overview.attempts)
    if overview.startup is not None:
        lines += startup_lines(overview.startup, parse_state(record.state).is_terminal)
    sys.stdout.write("".join(f"  {line}\n" for line in lines))


def show_status(got: Refreshed, json_out: bool, history_path: Path) -> None:
    """One status listing: JSON for scripts, a table for people, warnings on stderr.

    `got.starts`: the expected start of pending jobs by id (`squeue --start`).
    """
    records, report, starts = got.records, got.report, got.starts
    warnings = report.warnings
    if json_out:
        data: dict[str, object] = {
            "cluster": got.cluster or None, "slurm_calls": report.calls,
            "warnings": warnings, "jobs": [
                {**job_dict(r), "expected_start": starts.get(r.job_id)} for r in records]}
        if len(records) == 1:
            data["jobs"][0].update(_overview_dict(got.overview))  # type: ignore[index]
        if report.error:
            data["error"] = {"what": report.error.what, "fix": report.error.fix}
        print_json(data)
        return
    for w in warnings:
        err_console.print(f"[yellow]warning:[/] {w}", highlight=False)
    if not records:
        # Plain text: rich costs ~40 ms to import, more than the rest of this answer.
        sys.stderr.write(f"No jobs in the history ({history_path}); submit one with "
                         "`hpctrain submit --profile ...`.\n")
    elif is_tty() and len(records) <= _RICH_MAX_ROWS:
        console.print(table(one_row_per_chain(records), starts=starts))
    else:
        sys.stdout.write(plain_table(one_row_per_chain(records), starts))
    if len(records) == 1:
        sys.stdout.write(f"  {code_line(records[0])}\n")
        _show_overview(records[0], got.overview)


def _overview_dict(overview: Overview | None) -> dict[str, Any]:
    """A job's overview in status's JSON: null or empty where there is none."""
    if overview is None:
        return {"monitor": None, "startup": None, "attempts": []}
    startup = overview.startup
    return {"monitor": overview.monitor, "startup": startup and startup.as_dict(),
            "attempts": overview.attempts}


def _frame(load: Load, interval: float) -> Any:
    stamp = time.strftime("%H:%M:%S")
    try:
        got = load()
    except HpctrainError as e:
        from rich.text import Text

        return Text(f"{stamp}  SLURM did not answer: {e}", style="red")
    from rich.markup import escape

    report = got.report
    caption = (f"{stamp}  every {interval:g} s, {report.calls} SLURM call(s); Ctrl-C quits"
               + "".join(f"\nwarning: {escape(w)}" for w in report.warnings))
    if report.error:
        caption += f"\n[red]{escape(unanswered(report.error).what)}[/]"
    return table(one_row_per_chain(got.records), caption=caption)


def unanswered(error: HpctrainError) -> HpctrainError:
    """SLURM's silence as the status listing reports it: the states shown are the last seen."""
    return HpctrainError(
        f"{error.what}; the states shown are the last ones seen (marked ?), nothing was updated",
        error.fix)


def watch(load: Load, interval: float) -> None:
    """Refresh the table in place until Ctrl-C; SLURM hiccups show up and do not end it."""
    from rich.console import Console
    from rich.live import Live

    try:
        with Live(_frame(load, interval), console=Console(), auto_refresh=False,
                  transient=False) as live:
            while True:
                time.sleep(interval)
                live.update(_frame(load, interval), refresh=True)
    except KeyboardInterrupt:
        pass
