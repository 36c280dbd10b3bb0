"""`hpctrain stats`: what a job's GPUs, CPUs and memory did, from its monitor's samples."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from hpctrain.cli.flags import JsonOpt
from hpctrain.cli.output import console, print_json

if TYPE_CHECKING:
    from hpctrain.diagnosis.startup import Startup


def _fmt(value: Any, unit: str = "", digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}{unit}"


def _pair(a: Any, b: Any, unit: str = "") -> str:
    return f"{_fmt(a)} / {_fmt(b)}{unit}" if a is not None or b is not None else "-"


def node_rows(summary: dict[str, Any]) -> list[tuple[str, ...]]:
    """Per node: name, samples, seconds, CPU mean/peak, memory peak/total, monitor cost."""
    return [
        (n["node"], str(n["samples"]), _fmt(n["seconds"], " s"),
         _pair(n["cpu_mean_pct"], n["cpu_peak_pct"], " %"),
         _pair(n["mem_peak_mib"], n["mem_total_mib"], " MiB"),
         _fmt(n["monitor_cpu_pct"], " %", 2), n["gpu_source"] or "no GPU")
        for n in summary["nodes"]
    ]


def gpu_rows(summary: dict[str, Any]) -> list[tuple[str, ...]]:
    """Per GPU: node, index, name, utilization mean/peak, idle share, memory, power, energy."""
    return [
        (g["node"], str(g["index"]), g["name"], _pair(g["util_mean_pct"], g["util_peak_pct"], " %"),
         _fmt(g["idle_pct"], " %"), _pair(g["mem_peak_mib"], g["mem_total_mib"], " MiB"),
         _fmt(g["power_mean_w"], " W"), _fmt(g["energy_wh"], " Wh", 1),
         _fmt(g["temp_peak_c"], " C"))
        for n in summary["nodes"] for g in n["gpus"]
    ]


NODE_COLUMNS = ("NODE", "SAMPLES", "TIME", "CPU MEAN/PEAK", "MEM PEAK/TOTAL", "MONITOR CPU",
                "GPU SOURCE")
GPU_COLUMNS = ("NODE", "GPU", "NAME", "UTIL MEAN/PEAK", "IDLE", "MEM PEAK/TOTAL", "POWER",
               "ENERGY", "TEMP PEAK")


def _table(columns: tuple[str, ...], rows: list[tuple[str, ...]], title: str) -> Any:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=title, title_justify="left", box=None, pad_edge=False,
              header_style="bold")
    for col in columns:
        t.add_column(col, overflow="fold")
    for row in rows:
        t.add_row(*(escape(c) for c in row))
    return t


def startup_table(startup: Startup) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """Columns and rows: each node's batch script and ranks, the seconds from the job's start
    at which each mark came."""
    from hpctrain.diagnosis.startup import ORDER

    tracks = sorted([*startup.batch, *startup.ranks],
                    key=lambda t: (t.node, t.rank is not None, t.rank or 0))
    seen = [m.name for t in tracks for m in t.marks]
    names = [n for n in ORDER if n in seen] + [n for n in dict.fromkeys(seen) if n not in ORDER]
    rows = [(t.node, "batch" if t.rank is None else str(t.rank),
             *(_fmt(None if (at := t.at(n)) is None else at - startup.origin, " s", 1)
               for n in names)) for t in tracks]
    return ("NODE", "RANK", *(n.upper() for n in names)), rows


def show_startup(startup: Startup, ended: bool) -> None:
    """The start-up as a table of marks, with what took most of it."""
    from hpctrain.cli.jobview import startup_headline

    columns, rows = startup_table(startup)
    console.print(_table(columns, rows, f"Start-up (seconds from the {startup.origin_name})"))
    console.print(startup_headline(startup, ended), highlight=False, soft_wrap=True,
                  markup=False)


def show_summary(summary: dict[str, Any]) -> None:
    """The summary as tables and notes, for a person."""
    from rich.markup import escape

    console.print(_table(NODE_COLUMNS, node_rows(summary), "Nodes (CPU and memory: the node's)"))
    gpus = gpu_rows(summary)
    if gpus:
        console.print(_table(GPU_COLUMNS, gpus, "GPUs"))
    for note in summary["notes"]:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)


def stats(
    job: Annotated[
        str | None, typer.Argument(help="Job id or run directory (default: the last job).")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Per node and per GPU: utilization, memory, power and energy, with notes on waste; and
    each rank's start-up."""
    from hpctrain.cli import backends
    from hpctrain.tracking.selection import monitor_summary

    summary, run_dir, overview = monitor_summary(job, backends.history, backends.place_for)
    startup = overview.startup
    if json_out:
        print_json({**summary, "startup": startup and startup.as_dict()})
        return
    console.print(f"job {summary['job_id'] or '-'}: {summary['samples']} sample(s), run "
                  f"directory {run_dir}", highlight=False, soft_wrap=True)
    show_summary(summary)
    if startup is not None:
        show_startup(startup, overview.ended)


def register(app: typer.Typer) -> None:
    """Add stats to the root app."""
    app.command(epilog="Example: hpctrain stats 1234 --json")(stats)
