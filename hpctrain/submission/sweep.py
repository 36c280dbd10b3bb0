"""`hpctrain sweep`: a study of many points as SLURM job arrays, planned as a value, then queued.

One run directory for the sweep (scripts, profile, request, sweep.json, logs/); each point has
its own run directory under points/ with its settings in point.args, read by the array task's
script. One sbatch per array; an array holds at most the site's MaxArraySize points, and a
throttled sweep's next array waits for the one before (so `%K` holds for the whole sweep).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpctrain.errors import HpctrainError, SlurmError
from hpctrain.plan import sweep as points_of
from hpctrain.plan.model import SweepArray
from hpctrain.plan.sweep import Point, Sweep
from hpctrain.submission.planned import RunDirPlan, Script, image_paths
from hpctrain.values import rundir
from hpctrain.values.rundir import RunDir, RunFile

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord, NewJob, StudyRecord
    from hpctrain.places import Place
    from hpctrain.plan import JobRequest
    from hpctrain.snapshots.spec import CodeSpec
    from hpctrain.submission.prepare import Prepared
    from hpctrain.submission.submit import Origin
    from hpctrain.trainconfig.model import TrainConfig


@dataclass(frozen=True)
class SweepPlan:
    """What the user asked: the job every point shares, the points, the throttle."""

    base: JobRequest
    sweep: Sweep
    max_parallel: int | None = None
    # None: the cluster's MaxArraySize (`scontrol show config`), asked when preparing.
    max_array_size: int | None = None
    name: str | None = None


@dataclass(frozen=True)
class PreparedSweep:
    """Everything the sweep will write and queue: one Prepared script per array."""

    name: str
    sweep: Sweep
    arrays: tuple[Prepared, ...]
    files: tuple[RunFile, ...]
    max_array_size: int
    # Each point's arguments after the job's command (what its point.args holds).
    args: tuple[tuple[str, ...], ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def run_dir(self) -> Path:
        return self.arrays[0].run_dir

    def scripts(self) -> tuple[Script, ...]:
        return tuple(Script(p.plan.array.spec if p.plan.array else p.script_name,
                            p.script_path, p.script, p.plan) for p in self.arrays)

    def run_dirs(self) -> tuple[RunDirPlan, ...]:
        return (RunDirPlan(self.run_dir, self.files),)

    def frozen_code(self) -> CodeSpec | None:
        return self.arrays[0].code

    def needed_paths(self) -> tuple[str, ...]:
        return image_paths(self.scripts())

    def with_listing(self, checked: CodeSpec) -> PreparedSweep:
        from hpctrain.submission.prepare import listed

        return replace(self, arrays=tuple(replace(p, code=listed(p.code, checked))
                                          for p in self.arrays))

    def point_dir(self, index: int) -> Path:
        count = len(self.sweep.points)
        return RunDir(self.run_dir).point(points_of.point_dir_name(index, count)).root

    @property
    def gpu_hours(self) -> float:
        """What the whole study reserves at most: every point's GPUs for its time limit."""
        return self.arrays[0].plan.gpu_hours * len(self.sweep.points)

    def as_dict(self) -> dict[str, Any]:
        first = self.arrays[0]
        return {"name": self.name, "run_dir": str(self.run_dir), "points": len(self.sweep.points),
                "gpu_hours": round(self.gpu_hours, 2),
                "method": self.sweep.method, "keys": list(self.sweep.keys),
                "max_array_size": self.max_array_size,
                "arrays": [{"script": str(p.script_path), "array": p.plan.array.spec
                            if p.plan.array else None} for p in self.arrays],
                "plan": first.plan.summary(), "code": first.code.as_dict() if first.code
                else None, "notes": list(self.notes),
                "sample": [dict(p) for p in self.sweep.points[:5]]}


def point_args(req: JobRequest, point: Point) -> tuple[str, ...]:
    """A point's arguments after the job's command: `--set KEY=VALUE` for the packaged trainer
    (no command, or `hpctrain train`); for the user's own command its arguments from the
    first `{KEY}` placeholder on, filled in, or else `KEY=VALUE` (Hydra's override syntax)."""
    if req.command and points_of.placeholders(req.command):
        return points_of.fill_command(req.command, point)[1]
    if req.command and tuple(req.command[:2]) != points_of.TRAIN_COMMAND:
        return tuple(f"{k}={v}" for k, v in point)
    return tuple(arg for k, v in point for arg in ("--set", f"{k}={v}"))


def shared_command(req: JobRequest) -> JobRequest:
    """The request the arrays' script runs: a templated command cut before its first
    placeholder (each point's point.args holds the rest, filled in)."""
    if not points_of.placeholders(req.command):
        return req
    return replace(req, command=points_of.fill_command(req.command, ())[0])


def check_points(req: JobRequest, sweep: Sweep) -> tuple[str, ...]:
    """Every point's settings are read now as its trainer will read them, and its job planned:
    a bad value is refused before anything queues, naming the point. A command of one's own
    must take each swept value (a placeholder, or Hydra's KEY=VALUE); the notes."""
    from hpctrain.plan import build_plan

    if req.command:
        notes = points_of.check_command(req.command, sweep)
        build_plan(shared_command(req))
        return notes
    from hpctrain.trainconfig.options import config_args

    base = req.trainer
    # The shared settings as the job's command carries them (the --set values), made once.
    fixed = tuple(config_args(base)[3::2]) if base is not None else ()
    task = base.task if base is not None else None
    planned: set[tuple[Any, ...]] = set()
    from hpctrain.trainconfig.load import load_config

    for n, point in enumerate(sweep.points):
        with _naming(n, point):
            settings = load_config(None, task, [*fixed, *(f"{k}={v}" for k, v in point)])
            # Points differing only in what no rule reads plan alike: plan each shape once.
            shape = _plan_shape(settings)
            if shape not in planned:
                build_plan(replace(req, trainer=settings))
                planned.add(shape)
    return ()


@contextlib.contextmanager
def _naming(n: int, point: Point) -> Iterator[None]:
    """A refusal of a point's settings or job, naming the point."""
    try:
        yield
    except HpctrainError as e:
        raise HpctrainError(f"point {n} ({points_of.describe(point)}): {e.what}",
                            e.fix) from None


def _plan_shape(settings: TrainConfig) -> tuple[Any, ...]:
    # The plan's rules read the trainer's batch settings and CUDA graphs (plan/batch.py,
    # plan/trainer_options.py); the rest of a point never changes its job.
    t = settings.trainer
    return (t.batch_size, t.global_batch, t.max_device_batch, t.cuda_graphs)


def max_array_size(place: Place, given: int | None) -> tuple[int, tuple[str, ...]]:
    """The site's MaxArraySize (or --max-array-size); SLURM's default where none is known."""
    if given is not None:
        return given, ()
    try:
        value = place.slurm_client().config().get("MaxArraySize")
    except SlurmError as e:
        return points_of.DEFAULT_MAX_ARRAY_SIZE, (
            f"MaxArraySize not asked ({e.what}): SLURM's default "
            f"{points_of.DEFAULT_MAX_ARRAY_SIZE} assumed",)
    if value is None or not value.isdigit():
        return points_of.DEFAULT_MAX_ARRAY_SIZE, ()
    return int(value), ()


def prepare_sweep(plan: SweepPlan, place: Place, *, token: str | None = None
                  ) -> PreparedSweep:
    """Decide the sweep: its run directory, one script per array, every point's files."""
    from datetime import datetime, timezone

    from hpctrain.submission.prepare import prepare

    req = place.adapt(plan.base)
    checked = check_points(req, plan.sweep)
    limit, notes = max_array_size(place, plan.max_array_size)
    notes = checked + notes
    count = len(plan.sweep.points)
    arrays = points_of.chunks(count, limit, plan.max_parallel)
    # One moment and one token: every array's script shares the sweep's run directory.
    now, token = datetime.now(timezone.utc), token or os.urandom(3).hex()
    shared = shared_command(req)
    prepared = tuple(
        prepare(replace(shared, array=a), place.workdir, environ=os.environ, now=now,
                token=token, script_name=_script_name(k, len(arrays)))
        for k, a in enumerate(arrays))
    first = prepared[0]
    args = tuple(point_args(req, p) for p in plan.sweep.points)
    if len(arrays) > 1:
        notes += (f"{count} points in {len(arrays)} arrays of at most {limit} (MaxArraySize)",)
    return PreparedSweep(plan.name or first.run_dir.name, plan.sweep, prepared,
                         _files(prepared, args), limit, args, notes)


def _script_name(k: int, arrays: int) -> str:
    return rundir.SCRIPT if arrays == 1 else rundir.SCRIPT.replace(".", f"-{k}.", 1)


def _files(prepared: Sequence[Prepared], args: Sequence[Sequence[str]]
           ) -> tuple[RunFile, ...]:
    """The arrays' files (their shared ones once), the logs' folder, every point's args."""
    run_dir = prepared[0].run_dir
    count = len(args)
    files: dict[Path, RunFile] = {f.path: f for p in prepared for f in p.files}
    readme = RunDir(run_dir).sweep_logs / "README"
    files[readme] = RunFile(
        readme,
        text="SLURM's output of each array task: <job name>-<array job id>_<task id>.out and "
             f".err;\nthe point each task ran is in ../{rundir.SWEEP_INFO}.\n")
    for n, point in enumerate(args):
        path = RunDir(run_dir).point(points_of.point_dir_name(n, count)).point_args
        files[path] = RunFile(path, text="".join(f"{a}\n" for a in point))
    return tuple(files.values())


@dataclass(frozen=True)
class SweepSubmitted:
    """The queued sweep: its study record, and each array's job ids (one per segment)."""

    study: StudyRecord
    run_dir: Path
    arrays: tuple[tuple[str, ...], ...]
    points: int
    origin: Origin

    def as_dict(self) -> dict[str, Any]:
        return {"study": self.study.name, "study_id": self.study.id,
                "run_dir": str(self.run_dir), "points": self.points,
                "arrays": [list(a) for a in self.arrays],
                "follow": [f"hpctrain status --study {self.study.name}",
                           f"hpctrain sweep-report {self.study.name}"]}


def submit_sweep(prep: PreparedSweep, place: Place, history: History,
                 on_array: Callable[[str, SweepArray], None] = lambda *_: None
                 ) -> SweepSubmitted:
    """Write the run directory, sbatch each array (and its chain), record every point."""
    from hpctrain.submission.submit import create_run_dir

    first = prep.arrays[0]
    origin = create_run_dir(dataclasses.replace(first, files=prep.files), place)
    study = _record_study(prep, place, history)
    queued: list[tuple[str, ...]] = []
    try:
        for prepared in prep.arrays:
            ids = _queue_array(prepared, place, queued[-1][-1] if queued else None)
            queued.append(ids)
            _record_points(prep, prepared, ids, place, history, study, origin)
            assert prepared.plan.array is not None
            on_array(ids[0], prepared.plan.array)
    except HpctrainError as e:
        if not queued:
            place.discard(prep.run_dir)
            history.delete_study(study.id or 0)
            raise
        raise HpctrainError(
            f"{e.what}; sweep {study.name} is queued only in part (arrays "
            f"{', '.join(a[0] for a in queued)})",
            f"cancel that part with `hpctrain cancel --study {study.name}`, or let it run"
        ) from None
    runs = [{"job_ids": list(ids), "offset": p.plan.array.offset, "size": p.plan.array.size}
            for ids, p in zip(queued, prep.arrays, strict=True) if p.plan.array]
    history.update_study_runs(study.id or 0, runs)
    _write_info(prep, queued, place)
    return SweepSubmitted(replace(study, runs=runs), prep.run_dir, tuple(queued),
                          len(prep.sweep.points), origin)


def _record_study(prep: PreparedSweep, place: Place, history: History) -> StudyRecord:
    from hpctrain.history import StudyRecord

    return history.add_study(StudyRecord(
        name=prep.name, profile=prep.arrays[0].plan.profile, mode=prep.sweep.method,
        directory=str(prep.run_dir), runs=[], kind="sweep"))


def _queue_array(prepared: Prepared, place: Place, before: str | None) -> tuple[str, ...]:
    """sbatch one array and its chain's later segments (each task after its own forerunner)."""
    client = place.slurm_client()
    plan = prepared.plan
    ids = [client.submit(prepared.script_path, cwd=prepared.workdir,
                         options=_first_options(plan.after, before, plan.array))]
    for _segment in range(2, plan.chain + 1):
        # aftercorr: task T of this segment starts when task T of the one before has ended.
        ids.append(client.submit(prepared.script_path, cwd=prepared.workdir,
                                 options=(f"--dependency=aftercorr:{ids[-1]}",)))
    return tuple(ids)


def _first_options(after: Sequence[str], before: str | None, array: SweepArray | None
                   ) -> tuple[str, ...]:
    deps = [f"afterok:{':'.join(after)}"] if after else []
    if before is not None and array is not None and array.throttle:
        # The throttle holds for the whole sweep: the next array waits for this one.
        deps.append(f"afterany:{before}")
    return (f"--dependency={','.join(deps)}",) if deps else ()


def _record_points(prep: PreparedSweep, prepared: Prepared, ids: Sequence[str], place: Place,
                   history: History, study: StudyRecord, origin: Origin) -> list[JobRecord]:
    """One history row per point and segment, named ARRAY_TASK as SLURM names it: submit's
    row of the job, with the point's name, command, run directory and study."""
    array = prepared.plan.array
    assert array is not None
    # Read once for the array (a local place reads it from slurm.conf at each ask).
    cluster = place.slurm_client().cluster_name() or prepared.plan.cluster
    jobs = [_point_job(prep, prepared, ids, (segment, task), place, cluster, study, origin)
            for task in range(array.size) for segment in range(1, len(ids) + 1)]
    return history.add_all(jobs)


def _point_job(prep: PreparedSweep, prepared: Prepared, ids: Sequence[str],
               where: tuple[int, int], place: Place, cluster: str, study: StudyRecord,
               origin: Origin) -> NewJob:
    from hpctrain.submission.submit import Queued, expand_log_pattern, new_job

    segment, task = where
    plan = prepared.plan
    assert plan.array is not None
    index = plan.array.offset + task
    stdout, stderr = (expand_log_pattern(p, ids[segment - 1], plan.job_name, place.user,
                                         task=str(task))
                      for p in (prepared.logs.stdout, prepared.logs.stderr))
    done = Queued(f"{ids[segment - 1]}_{task}", cluster, stdout, stderr, origin)
    # A chain's head is its first segment's task; the first segment names none (as submit).
    head = f"{ids[0]}_{task}" if segment > 1 else None
    return replace(new_job(prepared, done, place, head, segment),
                   job_name=f"{plan.job_name}#{index}", run_dir=str(prep.point_dir(index)),
                   command=[*plan.command, *prep.args[index]], study=study.id)


def _write_info(prep: PreparedSweep, queued: Sequence[Sequence[str]], place: Place) -> None:
    """sweep.json: the points and which array task runs each (the report and people read it)."""
    arrays = [{"job_ids": list(ids), "offset": p.plan.array.offset if p.plan.array else 0,
               "spec": p.plan.array.spec if p.plan.array else None}
              for ids, p in zip(queued, prep.arrays, strict=True)]
    info = {"study": prep.name, **prep.sweep.as_dict(), "arrays": arrays}
    place.write(RunDir(prep.run_dir).sweep_info, json.dumps(info, indent=1) + "\n")


@dataclass(frozen=True)
class SweepKind:
    """`hpctrain sweep`: the points as job arrays, recorded as one study."""

    plan: SweepPlan
    on_array: Callable[[str, SweepArray], None] = lambda *_: None

    @property
    def runs_folder(self) -> str:
        return self.plan.base.profile.output_dir

    def prepare(self, place: Place) -> PreparedSweep:
        return prepare_sweep(self.plan, place)

    def execute(self, prepared: PreparedSweep, place: Place, history: History
                ) -> SweepSubmitted:
        return submit_sweep(prepared, place, history, self.on_array)
