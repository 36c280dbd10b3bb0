"""`hpctrain scale` and `scale-report`: the same training at several topologies, compared."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hpctrain.cli import backends
from hpctrain.cli.output import console, err_console, print_json
from hpctrain.errors import HpctrainError

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord, StudyRecord
    from hpctrain.jobs.scale import Topology

JsonOpt = Annotated[bool, typer.Option("--json", help="The table as JSON (one object per "
                                       "topology, and the plot's path).")]
_COLUMNS = ("TOPOLOGY", "GPUS", "TIME", "SAMPLES/S", "PER GPU", "SPEEDUP", "EFFICIENCY",
            "GPU UTIL", "STATE")
_POLL_S = (2.0, 15.0)  # first and longest pause between two looks at the runs
PLOT_HINT = "no plot: matplotlib is not installed; pip install 'hpctrain[plot]' for one"


def _trainer_args(task: str | None, config: str | None, max_epochs: int | None,
                  sets: list[str]) -> list[str]:
    args: list[str] = []
    if task:
        args += ["--task", task]
    if config:
        # Absolute: the job starts in the submit directory, and a leading '-' is no option.
        args += ["--config", os.path.abspath(config)]
    if max_epochs is not None:
        args += ["--max-epochs", str(max_epochs)]
    for item in sets:
        args += ["--set", item]
    return args


def _default_batch(task: str | None, config: str | None, sets: list[str]) -> int:
    """The trainer's per-device batch size for these options (its config, without torch)."""
    from hpctrain.trainer.config import load_config

    return int(load_config(config, task, sets).trainer.batch_size)


def _submit_one(base: Any, topo: Topology, batch: int, args: list[str], history: History,
                cluster: str) -> dict[str, Any]:
    """Submit one topology's run; a refused one is recorded with its error, not hidden."""
    from dataclasses import replace

    from hpctrain.jobs.prepare import prepare
    from hpctrain.jobs.scale import run_record, trainer_command
    from hpctrain.jobs.submit import submit

    client, _ = backends.slurm()
    req = replace(base, nodes=topo.nodes, gpus_per_node=topo.gpus_per_node,
                  job_name=f"{base.job_name}-{topo.label}", command=trainer_command(args, batch))
    try:
        done = submit(prepare(req, Path.cwd(), environ=os.environ), client, history)
    except HpctrainError as e:
        err_console.print(f"[red]{topo.label}: not submitted:[/] {e}", highlight=False)
        return run_record(topo, batch, None, cluster, None, str(e))
    err_console.print(f"{topo.label}: job {done.job_id}", highlight=False)
    return run_record(topo, batch, done.job_id, done.cluster, str(done.run_dir))


def _run_study(study: StudyRecord, base: Any, plan: list[tuple[Topology, int]],
               args: list[str], history: History, one_at_a_time: bool,
               timeout_s: float | None) -> None:
    """Submit the runs in order; one at a time, each waits until the one before has ended."""
    from dataclasses import replace

    started = time.monotonic()
    runs = list(study.runs)
    for i, (topo, batch) in enumerate(plan):
        runs[i] = _submit_one(base, topo, batch, args, history, study.runs[i]["cluster"])
        history.update_study_runs(study.id or 0, runs)
        if one_at_a_time and runs[i]["job_id"] and i + 1 < len(plan):
            left = None if timeout_s is None else timeout_s - (time.monotonic() - started)
            _wait(history, replace(study, runs=[runs[i]]), left)
    study.runs[:] = runs


def _records(history: History, study: StudyRecord) -> dict[str, JobRecord]:
    ids = [str(r["job_id"]) for r in study.runs if r.get("job_id")]
    return {r.job_id: r for r in history.by_job_ids(ids)
            if any(r.cluster == run.get("cluster") for run in study.runs)}


def _refresh(history: History, study: StudyRecord) -> dict[str, JobRecord]:
    """The study's jobs with states fresh from SLURM (one squeue, one sacct)."""
    from hpctrain.jobs.watcher import JobWatcher

    records = _records(history, study)
    if records and not all(r.terminal for r in records.values()):
        client, cluster = backends.slurm()
        fresh, _report = JobWatcher(client, history, cluster).refresh(list(records.values()))
        records = {r.job_id: r for r in fresh}
    return records


def _wait(history: History, study: StudyRecord, timeout_s: float | None) -> dict[str, JobRecord]:
    pause, started = _POLL_S[0], time.monotonic()
    while True:
        records = _refresh(history, study)
        left = [r.job_id for r in records.values() if not r.terminal]
        if not left:
            return records
        if timeout_s is not None and time.monotonic() - started > timeout_s:
            raise HpctrainError(
                f"runs {', '.join(left)} of study {study.name} still not ended after "
                f"{timeout_s:g} s",
                f"see them with `hpctrain status {' '.join(left)}`; the table comes with "
                f"`hpctrain scale-report {study.name}` once they end")
        time.sleep(pause)
        pause = min(pause * 1.5, _POLL_S[1])


def _results(study: StudyRecord, records: dict[str, JobRecord]) -> list[Any]:
    from hpctrain.jobs.scale import RunResult, read_metrics
    from hpctrain.monitor.stats import job_summary

    out = []
    for run in study.runs:
        rec = records.get(str(run.get("job_id")))
        state = "NOT SUBMITTED" if not run.get("job_id") else rec.state if rec else "UNKNOWN"
        summary = job_summary(Path(run["run_dir"])) if run.get("run_dir") else None
        out.append(RunResult(run, state, read_metrics(run.get("run_dir")),
                             summary["gpu_util_mean_pct"] if summary else None))
    return out


def _cell(value: Any, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _table_rows(rows: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    return [
        (r["topology"], str(r["gpus"]), _cell(r["time_s"], ".1f") + (" s" if r["time_s"] else ""),
         _cell(r["samples_per_s"], ",.0f"), _cell(r["samples_per_s_per_gpu"], ",.0f"),
         _cell(r["speedup"], ".2f"),
         "-" if r["efficiency"] is None else f"{100 * r['efficiency']:.0f} %",
         "-" if r["gpu_util_mean_pct"] is None else f"{r['gpu_util_mean_pct']:.0f} %",
         r["state"] + (f" ({r['error']})" if r["error"] else ""))
        for r in rows
    ]


def _show(data: dict[str, Any], json_out: bool, pending: list[str]) -> None:
    if json_out:
        print_json({**data, "pending": pending})
        return
    _print_table(f"study {data['study']} ({data['mode']} scaling)", _table_rows(data["runs"]))
    if pending:
        err_console.print(f"still running: {', '.join(pending)}; run `hpctrain scale-report "
                          f"{data['study']}` again when they have ended", highlight=False)
    elif data["plot"]:
        console.print(f"plot: {data['plot']}", highlight=False, soft_wrap=True)
    else:
        err_console.print(PLOT_HINT if not _has_matplotlib() else
                          "no plot: no run has a measured throughput", highlight=False)
    console.print("speedup and efficiency: samples/s (first epoch left out as warm-up) "
                  "against the run with the fewest GPUs", style="dim", highlight=False)


def _print_table(title: str, rows: list[tuple[str, ...]]) -> None:
    """Rich for a terminal; aligned plain text for a pipe or a log, never folded."""
    from hpctrain.cli.output import is_tty

    if not is_tty():
        lines = [_COLUMNS, *rows]
        widths = [max(len(line[i]) for line in lines) for i in range(len(_COLUMNS))]
        sys.stdout.write(title + "\n" + "\n".join(
            "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
            for line in lines) + "\n")
        return
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=escape(title), title_justify="left", box=None, pad_edge=False,
              header_style="bold")
    for col in _COLUMNS:
        t.add_column(col, no_wrap=col != "STATE")
    for row in rows:
        t.add_row(*(escape(c) for c in row))
    console.print(t)


def _has_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def _report(history: History, study: StudyRecord, records: dict[str, JobRecord],
            json_out: bool) -> None:
    from hpctrain.jobs import scale

    rows = scale.table(_results(study, records))
    pending = [r.job_id for r in records.values() if not r.terminal]
    if pending:
        data = {"study": study.name, "mode": study.mode, "directory": study.directory,
                "plot": None, "runs": rows}
    else:
        data = scale.report(study.name, study.mode, rows, Path(study.directory))
    _show(data, json_out, pending)


def _study_dir(profile_dir: str, name: str | None) -> Path:
    from hpctrain.jobs.prepare import run_dir_for

    return run_dir_for(profile_dir, name or "scale", Path.cwd())


TopologiesOpt = Annotated[str, typer.Option(
    "--topologies", "-T", help="NODESxGPUS per node, comma-separated, e.g. 1x1,1x4,2x4.")]
StrongOpt = Annotated[bool, typer.Option(
    "--strong", help="Fixed global batch (split over the GPUs) instead of a fixed batch per GPU.")]
BatchOpt = Annotated[int | None, typer.Option(
    min=1, help="Per GPU (weak, default: the trainer's) or global with --strong (default: the "
    "trainer's x the first topology's GPUs).")]
EpochsOpt = Annotated[int | None, typer.Option(
    min=1, help="Epochs per run (the first is left out of the throughput when there are more).")]
SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", help="Trainer field KEY=VALUE (repeatable).")]
TimeOpt = Annotated[str | None, typer.Option("--time", "-t", help="Wall time per run.")]
NameOpt = Annotated[str | None, typer.Option(help="Study name (default: scale-<time>-<id>).")]
WaitOpt = Annotated[bool, typer.Option(
    "--wait", help="Wait for every run, then print the table and write the plot.")]
ParallelOpt = Annotated[bool, typer.Option(
    "--parallel", help="With --wait: submit every run at once (default: one at a time, so "
    "runs never share a node).")]
WaitTimeoutOpt = Annotated[float | None, typer.Option(
    min=1, help="Give up waiting after this many seconds.")]


def scale(
    profile: Annotated[str, typer.Option("--profile", "-P", help="Cluster profile.")],
    topologies: TopologiesOpt,
    strong: StrongOpt = False,
    batch_size: BatchOpt = None,
    task: Annotated[str | None, typer.Option(help="Packaged task, e.g. spiral.")] = None,
    config: Annotated[str | None, typer.Option(help="Trainer config file.")] = None,
    max_epochs: EpochsOpt = None,
    sets: SetOpt = None,
    time_limit: TimeOpt = None,
    partition: Annotated[str | None, typer.Option(help="Partition.")] = None,
    account: Annotated[str | None, typer.Option("--account", "-A", help="Account.")] = None,
    name: NameOpt = None,
    wait: WaitOpt = False,
    parallel: ParallelOpt = False,
    wait_timeout: WaitTimeoutOpt = None,
    monitor_interval: Annotated[int, typer.Option(min=1, help="Seconds between monitor "
                                "samples.")] = 10,
    json_out: JsonOpt = False,
) -> None:
    """Run the packaged trainer at each topology; compare throughput, speedup, efficiency."""
    from hpctrain.cli.options import TopologyOptions, build_request
    from hpctrain.history import StudyRecord
    from hpctrain.jobs.scale import parse_topologies, per_device_batches, run_record

    topos = parse_topologies(topologies)
    extra = list(sets or [])
    batch = batch_size or _default_batch(task, config, extra) * (topos[0].gpus if strong else 1)
    batches = per_device_batches(topos, strong, batch)
    base = build_request(TopologyOptions(
        profile=profile, partition=partition, time=time_limit, account=account,
        monitor_interval=monitor_interval, job_name="scale"))
    history = backends.history()
    if name is not None and history.study(name) is not None:
        raise HpctrainError(f"a study named {name!r} exists already", "choose another --name")
    directory = _study_dir(base.profile.output_dir, name)
    _client, cluster = backends.slurm()
    study = history.add_study(StudyRecord(
        name=name or directory.name, profile=base.profile.name,
        mode="strong" if strong else "weak", directory=str(directory),
        runs=[run_record(t, batches[t], None, cluster, None, "not submitted yet")
              for t in topos]))
    err_console.print(f"study {study.name}: {len(topos)} run(s), "
                      f"{'one at a time' if wait and not parallel else 'all at once'}; "
                      f"table: hpctrain scale-report {study.name}", highlight=False)
    _run_study(study, base, [(t, batches[t]) for t in topos],
               _trainer_args(task, config, max_epochs, extra), history,
               one_at_a_time=wait and not parallel, timeout_s=wait_timeout)
    records = _wait(history, study, wait_timeout) if wait else _records(history, study)
    _report(history, study, records, json_out)


def scale_report(
    study: Annotated[str | None, typer.Argument(help="Study name or id (default: the last).")
                     ] = None,
    json_out: JsonOpt = False,
) -> None:
    """The table and plot of a scaling study (runs still going are shown as they are)."""
    history = backends.history()
    studies = history.studies()
    found = history.study(study) if study else (studies[-1] if studies else None)
    if found is None:
        raise HpctrainError(
            f"no study {study!r} in the history" if study else "no scaling study yet",
            "start one with `hpctrain scale --profile P --topologies 1x1,1x2`")
    _report(history, found, _refresh(history, found), json_out)


def register(app: typer.Typer) -> None:
    """Add scale and scale-report to the root app."""
    app.command(epilog="Example: hpctrain scale --profile local --topologies 1x1,1x2,2x2 "
                "--task spiral --max-epochs 3 --wait")(scale)
    app.command("scale-report", epilog="Example: hpctrain scale-report --json")(scale_report)
