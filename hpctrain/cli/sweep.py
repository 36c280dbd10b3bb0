"""`hpctrain sweep` and `sweep-report`: many points of one training as SLURM job arrays."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from hpctrain.cli import backends, sweepview
from hpctrain.cli.display import DryRunOpt, show
from hpctrain.cli.flags import JsonOpt
from hpctrain.cli.login import LoginOpt
from hpctrain.cli.options import JobOptions, build_request, with_job_options
from hpctrain.errors import HpctrainError

if TYPE_CHECKING:
    from hpctrain.plan.sweep import Sweep

GridOpt = Annotated[list[str] | None, typer.Option(
    "--grid", metavar="KEY=V1,V2", help="A setting and its values; every combination of the "
    "--grid options is a point (repeatable).")]
PointsOpt = Annotated[str | None, typer.Option(
    "--points", metavar="FILE", help="The points from a file: CSV with a header of keys, or "
    "YAML, a list of mappings.")]
SampleOpt = Annotated[list[str] | None, typer.Option(
    "--sample", metavar="KEY=DIST", help="A setting drawn at random: uniform:A,B, "
    "loguniform:A,B, int:A,B or choice:X,Y,Z (repeatable; with --samples).")]
SamplesOpt = Annotated[int | None, typer.Option(
    "--samples", min=1, metavar="N", help="With --sample: the number of random points.")]
SeedOpt = Annotated[int, typer.Option(help="With --sample: the random seed (same seed, same "
                                      "points).")]
ParallelOpt = Annotated[int | None, typer.Option(
    "--max-parallel", min=1, metavar="K", help="At most K points run at once (the array's %K).")]
ArraySizeOpt = Annotated[int | None, typer.Option(
    "--max-array-size", min=1, metavar="N", help="Points per array (default: the cluster's "
    "MaxArraySize, from scontrol show config).")]
NameOpt = Annotated[str | None, typer.Option(help="The study's name (default: the run "
                                             "directory's).")]
ChainOpt = Annotated[int, typer.Option("--chain", min=1, help="Each point as N jobs, each "
                                       "after its own forerunner (long trainings).")]


def _points(grid: list[str], points: str | None, sample: list[str], samples: int | None,
            seed: int, sets: list[str]) -> Sweep:
    """The sweep from exactly one of --grid, --points, --sample."""
    from hpctrain.plan import sweep

    given = [n for n, v in (("--grid", grid), ("--points", points), ("--sample", sample)) if v]
    if len(given) != 1:
        raise HpctrainError(f"give one of --grid, --points, --sample (got {len(given)})",
                            "e.g. --grid optim.lr=0.1,0.03 --grid trainer.batch_size=32,64")
    if bool(sample) != (samples is not None):
        raise HpctrainError("--sample and --samples go together",
                            "e.g. --sample optim.lr=loguniform:1e-4,1e-1 --samples 20")
    if grid:
        made = sweep.grid(grid)
    elif points:
        made = sweep.from_table(_read(points), points)
    else:
        made = sweep.samples(sample, samples or 0, seed)
    return sweep.with_fixed(made, sets)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise HpctrainError(f"--points {path}: {getattr(e, 'strerror', None) or e}",
                            "give a readable CSV or YAML file") from None


@with_job_options()
def sweep(
    job: JobOptions, grid: GridOpt = None, points: PointsOpt = None, sample: SampleOpt = None,
    samples: SamplesOpt = None, seed: SeedOpt = 0, max_parallel: ParallelOpt = None,
    max_array_size: ArraySizeOpt = None, chain: ChainOpt = 1, name: NameOpt = None,
    login: LoginOpt = None, dry_run: DryRunOpt = False, json_out: JsonOpt = False,
) -> None:
    """Run one training at many points (a grid, a list, random samples) as SLURM job arrays."""
    from dataclasses import replace

    from hpctrain.submission.pipeline import run
    from hpctrain.submission.questions import before_submit
    from hpctrain.submission.sweep import SweepKind, SweepPlan

    made = _points(grid or [], points, sample or [], samples, seed, list(job.trainer.sets))
    # The default job name says what it is: the points are `sweep#0`, `sweep#1`, ...
    named = replace(job, job_name="sweep") if job.job_name == "hpctrain" else job
    request = replace(build_request(named), chain=chain)
    history = backends.history()
    if name is not None and history.study(name) is not None:
        raise HpctrainError(f"a study named {name!r} exists already", "choose another --name")
    place = backends.place_for(request.profile, login, job.python_env)
    request = before_submit(request, place, history)
    kind = SweepKind(SweepPlan(request, made, max_parallel, max_array_size, name))
    show(run(kind, place, history, dry_run), place, json_out)


def sweep_report(
    study: Annotated[str | None, typer.Argument(help="Study name or id (default: the last "
                                                "sweep).")] = None,
    metric: Annotated[str | None, typer.Option(help="The metric to rank by (default: the "
                                               "task's, e.g. val_acc).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """The table of a sweep's points (settings, final and best metric, time, state, why it
    failed), the best point, and a plot of the metric against each swept setting."""
    from hpctrain.studies.sweep_report import Sweeps

    sweeps = Sweeps(backends.history(), backends.local_place())
    found = sweeps.find(study)
    report = sweeps.report(found, metric)
    sweepview.show_report(report, json_out)


def register(app: typer.Typer) -> None:
    """Add sweep and sweep-report to the root app."""
    app.command(
        context_settings={"allow_interspersed_args": False},
        epilog="Example: hpctrain sweep --profile local --task spiral --max-epochs 2 "
        "--grid optim.lr=0.1,0.03 --grid trainer.batch_size=32,64 --max-parallel 2")(sweep)
    app.command("sweep-report", epilog="Example: hpctrain sweep-report --json")(sweep_report)
