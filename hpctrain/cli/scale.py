"""`hpctrain scale` and `scale-report`: the same training at several topologies, compared."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hpctrain.cli import backends, display
from hpctrain.cli.flags import JsonOpt
from hpctrain.cli.login import LoginOpt
from hpctrain.cli.options import JobOptions, build_request, with_job_options
from hpctrain.cli.output import Display, console, err_console, print_json, register_displays

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord, StudyRecord
    from hpctrain.places import Place
    from hpctrain.studies.scaling_report import Studies
    from hpctrain.submission.pipeline import Outcome
    from hpctrain.submission.scaling_study import PreparedStudy

_COLUMNS = ("TOPOLOGY", "GPUS", "TIME", "SAMPLES/S", "MIN..MAX", "PER GPU", "SPEEDUP",
            "EFFICIENCY", "GPU UTIL", "STATE")
PLOT_HINT = "no plot: matplotlib is not installed; pip install 'hpctrain[plot]' for one"


def _cell(value: Any, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _columns(target: str | None) -> tuple[str, ...]:
    return _COLUMNS if not target else (*_COLUMNS[:-2], f"TO {target}", *_COLUMNS[-2:])


def _spread(r: dict[str, Any]) -> str:
    if r["samples_per_s_range"] is None:
        return "-"
    low, high = r["samples_per_s_range"]
    return f"{low:,.0f}..{high:,.0f}" + (f" NOISY x{r['rate_ratio']:.1f}" if r["noisy"] else "")


def _efficiency(r: dict[str, Any]) -> str:
    if r["efficiency"] is None:
        return "-"
    return f"{100 * r['efficiency']:.0f} %" + (" IMPLAUSIBLE" if r["implausible"] else "")


def _to_target(r: dict[str, Any]) -> str:
    repeats = len(r["repeats"])
    if not r["target_reached"]:
        return "not reached"
    return f"{r['time_to_target_s']:.1f} s" + (
        f" ({r['target_reached']}/{repeats})" if r["target_reached"] < repeats else "")


def _table_row(r: dict[str, Any], target: str | None) -> tuple[str, ...]:
    cells = (r["topology"], str(r["gpus"]),
             _cell(r["time_s"], ".1f") + (" s" if r["time_s"] else ""),
             _cell(r["samples_per_s"], ",.0f"), _spread(r), _cell(r["samples_per_s_per_gpu"],
                                                                   ",.0f"),
             _cell(r["speedup"], ".2f"), _efficiency(r))
    tail = ("-" if r["gpu_util_mean_pct"] is None else f"{r['gpu_util_mean_pct']:.0f} %",
            r["state"] + (f" ({r['error']})" if r["error"] else ""))
    return (*cells, _to_target(r), *tail) if target else (*cells, *tail)


def _notes(rows: list[dict[str, Any]]) -> list[str]:
    """What makes a row's numbers not a plain result, and why."""
    from hpctrain.studies.scaling_table import NOISY_RATIO

    noisy = [f"{r['topology']} is noisy: its epochs' samples/s differ by x{r['rate_ratio']:.1f} "
             f"(more than x{NOISY_RATIO:g}): other work shared the node"
             for r in rows if r["noisy"]]
    odd = [f"{r['topology']}: an efficiency of {100 * r['efficiency']:.0f} % is implausible, "
           f"not a result (left out of the plot's line); likely cause: {r['implausible']}"
           for r in rows if r["implausible"]]
    return noisy + odd


def _show(data: dict[str, Any], json_out: bool, pending: list[str]) -> None:
    from hpctrain.studies.plot import can_plot

    if json_out:
        print_json({**data, "pending": pending})
        return
    target = data.get("target")
    _print_table(f"study {data['study']} ({data['mode']} scaling)", _columns(target),
                 [_table_row(r, target) for r in data["runs"]])
    for note in _notes(data["runs"]):
        console.print(f"! {note}", style="bold yellow", highlight=False, markup=False,
                      soft_wrap=True)
    if pending:
        err_console.print(f"still running: {', '.join(pending)}; run `hpctrain scale-report "
                          f"{data['study']}` again when they have ended", highlight=False)
    elif data["plot"]:
        console.print(f"plot: {data['plot']}", highlight=False, soft_wrap=True)
    else:
        err_console.print(PLOT_HINT if not can_plot() else
                          "no plot: no run has a measured throughput", highlight=False)
    console.print("samples/s: the median over every repeat's epochs after its first (the "
                  "warm-up), MIN..MAX their range; speedup and efficiency: medians against "
                  "the topology with the fewest GPUs", style="dim", highlight=False)


def _print_table(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """Rich for a terminal; aligned plain text for a pipe or a log, never folded."""
    from hpctrain.cli.output import is_tty, plain_columns

    if not is_tty():
        sys.stdout.write(title + "\n" + plain_columns(columns, rows))
        return
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape(title), title_justify="left", box=None, pad_edge=False,
              header_style="bold")
    for col in columns:
        t.add_column(col, no_wrap=col != "STATE")
    for row in rows:
        t.add_row(*(escape(c) for c in row))
    console.print(t)


def _report(studies: Studies, study: StudyRecord, records: dict[str, JobRecord],
            json_out: bool, target: str | None = None) -> None:
    from hpctrain.studies.scaling_table import parse_target

    data, pending = studies.report(study, records, parse_target(target) if target else None)
    _show(data, json_out, pending)


def _submitted(run: dict[str, Any]) -> None:
    which = f"{run['topology']} #{run['repeat']}"
    if run["job_id"]:
        err_console.print(f"{which}: job {run['job_id']}", highlight=False)
    else:
        err_console.print(f"{which}: not submitted: {run['error']}", style="red",
                          highlight=False, markup=False)


TopologiesOpt = Annotated[str, typer.Option(
    "--topologies", "-T", help="NODESxGPUS per node, comma-separated, e.g. 1x1,1x4,2x4.")]
StrongOpt = Annotated[bool, typer.Option(
    "--strong", help="Fixed global batch (split over the GPUs) instead of a fixed batch per GPU.")]
BatchOpt = Annotated[int | None, typer.Option(
    min=1, help="Per GPU (weak, default: the trainer's) or global with --strong (default: the "
    "trainer's x the first topology's GPUs).")]
NameOpt = Annotated[str | None, typer.Option(help="Study name (default: scale-<time>-<id>).")]
WaitOpt = Annotated[bool, typer.Option(
    "--wait", help="Wait for every run, then print the table and write the plot.")]
ParallelOpt = Annotated[bool, typer.Option(
    "--parallel", help="With --wait: submit every run at once (default: one at a time, so "
    "runs never share a node).")]
RepeatsOpt = Annotated[int, typer.Option(
    min=1, help="Runs per topology; its samples/s is the median over all their epochs after "
    "the first, with the range.")]
TargetOpt = Annotated[str | None, typer.Option(
    help="Time to a metric: METRIC>=VALUE or METRIC<=VALUE (METRIC=VALUE: <= for a loss or "
    "error, else >=), e.g. val_acc=0.9; the table shows when each topology first reached it.")]
WaitTimeoutOpt = Annotated[float | None, typer.Option(
    min=1, help="Give up waiting after this many seconds.")]


# A study plans each run's nodes, GPUs, batch and name itself: it takes the job options that
# say where and how long, and the trainer's settings that every run shares.
SCALE_JOB = ("profile", "partition", "time", "account", "monitor_interval")
SCALE_TRAINER = ("--config", "--task", "--set", "--max-epochs")


@with_job_options(SCALE_JOB, SCALE_TRAINER)
def scale(
    job: JobOptions,
    topologies: TopologiesOpt,
    strong: StrongOpt = False,
    batch_size: BatchOpt = None,
    name: NameOpt = None,
    repeats: RepeatsOpt = 3,
    target: TargetOpt = None,
    wait: WaitOpt = False,
    parallel: ParallelOpt = False,
    wait_timeout: WaitTimeoutOpt = None,
    login: LoginOpt = None,
    dry_run: display.DryRunOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Run the packaged trainer at each topology; compare throughput, speedup, efficiency."""
    from dataclasses import replace

    from hpctrain.studies.scaling_table import parse_target
    from hpctrain.submission.pipeline import run
    from hpctrain.submission.questions import before_submit
    from hpctrain.submission.scaling_study import StudyKind, StudyPlan, plan_runs

    goal = parse_target(target) if target else None
    runs = plan_runs(topologies, strong=strong, batch_size=batch_size, trainer=job.trainer)
    base = build_request(replace(job, job_name="scale"))
    place = backends.place_for(base.profile, login)
    history = backends.history()
    # Every run's request is the base's with its topology: each keeps away from quarantined
    # nodes, ends before a window and is checked against the budget.
    base = before_submit(base, place, history)
    plan = StudyPlan(base, runs, strong, job.trainer.load(), repeats, goal)

    def started(study: StudyRecord) -> None:
        err_console.print(f"study {study.name}: {len(runs)} topolog(ies) x {repeats} run(s), "
                          f"{'one at a time' if wait and not parallel else 'all at once'}; "
                          f"table: hpctrain scale-report {study.name}", highlight=False)

    kind = StudyKind(plan, name, one_at_a_time=wait and not parallel, timeout_s=wait_timeout,
                     on_start=started, on_run=_submitted)
    _shown(run(kind, place, history, dry_run), place, history, wait, wait_timeout, json_out)


def _shown(outcome: Outcome[PreparedStudy, StudyRecord], place: Place, history: History,
           wait: bool, wait_timeout: float | None, json_out: bool) -> None:
    """The dry run, or the study's table once submitted (with --wait, once its runs ended)."""
    from hpctrain.studies.scaling_report import Studies

    if outcome.result is None:
        display.show(outcome, place, json_out)
        return
    studies = Studies(history, place)
    study = outcome.result
    records = studies.wait(study, wait_timeout) if wait else studies.records(study)
    _report(studies, study, records, json_out)


def _dry_run(outcome: Outcome[PreparedStudy, None], place: Place) -> None:
    """Each topology's job (its first run's plan) and the runs in the order they would go."""
    from hpctrain.cli.race import show_alternatives

    prep = outcome.prepared
    first: dict[str, Any] = {}
    for r in prep.runs:
        first.setdefault(r.topology.label, r.job.plan)
    show_alternatives(list(first.values()), None)
    err_console.print(f"{prep.plan.mode} scaling: {len(first)} topolog(ies) x "
                      f"{prep.plan.repeats} run(s), in this order: "
                      f"{', '.join(r.label for r in prep.runs)}; the study reserves "
                      f"{prep.gpu_hours:,.1f} GPU-hours at most", highlight=False)


def _dry_run_json(outcome: Outcome[PreparedStudy, None], place: Place) -> dict[str, object]:
    return outcome.prepared.as_dict()


def _displays() -> dict[type, Display]:
    """A scaling study's dry run (its result, the study, is shown as its table)."""
    from hpctrain.submission.scaling_study import PreparedStudy

    return {PreparedStudy: Display(_dry_run, _dry_run_json)}


register_displays(_displays)


def scale_report(
    study: Annotated[str | None, typer.Argument(help="Study name or id (default: the last).")
                     ] = None,
    target: Annotated[str | None, typer.Option(
        help="Time to this metric instead of the study's --target (same syntax).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """The table and plot of a scaling study (runs still going are shown as they are)."""
    from hpctrain import places
    from hpctrain.studies.scaling_report import Studies

    history = backends.history()
    found = Studies(history, backends.local_place()).find(study)
    # Where its runs went: this machine, or the login they were submitted through.
    studies = Studies(history, places.for_study(found, history, backends.local_place()))
    _report(studies, found, studies.refresh(found), json_out, target)


def register(app: typer.Typer) -> None:
    """Add scale and scale-report to the root app."""
    app.command(epilog="Example: hpctrain scale --profile local --topologies 1x1,1x2,2x2 "
                "--task spiral --max-epochs 3 --wait")(scale)
    app.command("scale-report", epilog="Example: hpctrain scale-report --json")(scale_report)
