"""How a sweep is shown: its dry run and the queued sweep (registered with cli/display.py),
its report (a table of points, the best one, the plot's path)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from hpctrain.cli.output import (
    Display,
    console,
    err_console,
    is_tty,
    plain_columns,
    print_json,
    register_displays,
    result_json,
)

if TYPE_CHECKING:
    from hpctrain.places import Place
    from hpctrain.submission.pipeline import Outcome
    from hpctrain.submission.sweep import PreparedSweep, SweepSubmitted


def _dry_run(outcome: Outcome[PreparedSweep, None], place: Place) -> None:
    from hpctrain.cli.render import show_summary

    show_summary(outcome.prepared.arrays[0].plan)
    _show_points(outcome.prepared)


def _dry_run_json(outcome: Outcome[PreparedSweep, None], place: Place) -> dict[str, object]:
    prep = outcome.prepared
    # render --json's names (plan, script, check); script_text stays (fields are only added).
    script = prep.arrays[0].script
    return {**prep.as_dict(), "script": script, "check": None, "script_text": script}


def _show_points(prep: PreparedSweep) -> None:
    count = len(prep.sweep.points)
    arrays = ", ".join(p.plan.array.spec for p in prep.arrays if p.plan.array)
    err_console.print(f"sweep {prep.name}: {count} point(s) ({prep.sweep.method} over "
                      f"{', '.join(prep.sweep.keys)}), array(s) {arrays}; the study reserves "
                      f"{prep.gpu_hours:,.1f} GPU-hours at most ({count} x "
                      f"{prep.arrays[0].plan.gpu_hours:,.2f})", highlight=False)
    from hpctrain.plan.sweep import describe

    for n, point in enumerate(prep.sweep.points[:3]):
        err_console.print(f"  point {n}: {describe(point)}", highlight=False)
    if count > 3:
        err_console.print(f"  ... {count - 3} more", highlight=False)
    for note in prep.notes:
        err_console.print(f"[yellow]note:[/] {note}", highlight=False)


def _submitted(outcome: Outcome[PreparedSweep, SweepSubmitted], place: Place) -> None:
    done = outcome.result
    assert done is not None
    _show_points(outcome.prepared)
    arrays = ", ".join(a[0] for a in done.arrays)
    console.print(f"Submitted sweep [bold]{done.study.name}[/]: {done.points} point(s) as "
                  f"job array(s) {arrays}", highlight=False)
    console.print(f"run directory: {done.run_dir}", highlight=False, soft_wrap=True)
    console.print(f"follow it:     hpctrain status --study {done.study.name}", highlight=False)
    console.print(f"results:       hpctrain sweep-report {done.study.name}", highlight=False)


def _displays() -> dict[type, Display]:
    """A sweep's values: its dry run and the queued sweep."""
    from hpctrain.submission.sweep import PreparedSweep, SweepSubmitted

    return {PreparedSweep: Display(_dry_run, _dry_run_json),
            SweepSubmitted: Display(_submitted, result_json)}


register_displays(_displays)


def _cell(value: Any, fmt: str = "") -> str:
    return "-" if value is None else format(value, fmt)


def rows(data: dict[str, Any]) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The header and one line per point: its settings, state, metric, time, why."""
    keys = list(data["keys"])
    metric = data["metric"] or "metric"
    header = ("POINT", "JOB", *keys, "STATE", f"FINAL {metric}", "BEST", "EPOCHS", "TIME",
              "WHY")
    body = [(str(r["point"]), r["job_id"], *(str(r["settings"].get(k, "-")) for k in keys),
             r["state"], _cell(r["final"], ".4g"), _cell(r["best"], ".4g"), _cell(r["epochs"]),
             _cell(r["time_s"], ".1f"), r["why"] or "")
            for r in data["points"]]
    return header, body


def show_report(data: dict[str, Any], json_out: bool) -> None:
    if json_out:
        print_json(data)
        return
    counts = data["counts"]
    header, body = rows(data)
    title = (f"sweep {data['study']} ({data['method']}): "
             + ", ".join(f"{v} {k}" for k, v in counts.items() if v))
    if is_tty():
        from rich.markup import escape
        from rich.table import Table

        t = Table(title=escape(title), title_justify="left", box=None, pad_edge=False,
                  header_style="bold")
        for col in header:
            t.add_column(escape(col), no_wrap=col != "WHY")
        for line in body:
            t.add_row(*(escape(c) for c in line))
        console.print(t)
    else:
        sys.stdout.write(title + "\n" + plain_columns(header, body))
    _show_best(data)


def _show_best(data: dict[str, Any]) -> None:
    top = data["best"]
    if top is not None:
        settings = " ".join(f"{k}={v}" for k, v in top["settings"].items())
        console.print(f"best: point {top['point']} ({settings}): {data['metric']} "
                      f"{top['best']:.4g} ({data['mode']})", highlight=False, soft_wrap=True)
    elif data["metric"] is None:
        err_console.print("no metric to rank by yet: the points have written none (a script "
                          "of your own writes them with hpctrain.progress.log_metrics: "
                          "docs/sweeps.md)", highlight=False)
    elif not any(r["best"] is not None for r in data["points"]):
        names = ", ".join(data.get("logged_metrics") or []) or "none"
        err_console.print(f"no point has logged {data['metric']} yet (they logged: {names})",
                          highlight=False)
    if data["plot"]:
        console.print(f"plot: {data['plot']}", highlight=False, soft_wrap=True)
    elif data["counts"]["running"] or data["counts"]["pending"]:
        err_console.print(f"the report and plot are written once every point has ended: "
                          f"`hpctrain sweep-report {data['study']}` again later",
                          highlight=False)
