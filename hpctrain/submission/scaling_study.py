"""A scaling study submitted: planned as a value (StudyKind, its dry run), recorded, then run by
run (one at a time: each after the one before has ended). Reading it back is
studies/scaling_report.py's."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpctrain.errors import HpctrainError
from hpctrain.studies import scaling_table
from hpctrain.studies.scaling_report import Studies
from hpctrain.submission.planned import RunDirPlan, Script, image_paths
from hpctrain.values.units import Topology

if TYPE_CHECKING:
    from hpctrain.history import History, StudyRecord
    from hpctrain.places import Place
    from hpctrain.plan import JobRequest
    from hpctrain.snapshots.spec import CodeSpec
    from hpctrain.submission.prepare import Prepared
    from hpctrain.trainconfig.model import TrainConfig
    from hpctrain.trainconfig.options import TrainerCall


def plan_runs(topologies: str, *, strong: bool, batch_size: int | None, trainer: TrainerCall
              ) -> tuple[tuple[Topology, int], ...]:
    """Each topology with its per-device batch (weak: the same; strong: the global split)."""
    topos = scaling_table.parse_topologies(topologies)
    # Read as every run's trainer will read it: a bad file, --set or a --task that conflicts
    # with the file's task is refused now, not after each run waited in the queue.
    trainer_batch = int(trainer.load().trainer.batch_size)
    batch = batch_size or trainer_batch * (topos[0].gpus if strong else 1)
    batches = scaling_table.per_device_batches(topos, strong, batch)
    return tuple((t, batches[t]) for t in topos)


def with_batch(settings: TrainConfig, batch: int) -> TrainConfig:
    """The settings with this per-device batch size (validated as a --set of it would be)."""
    return type(settings).model_validate(
        {**settings.model_dump(), "trainer": {**settings.trainer.model_dump(),
                                              "batch_size": batch}})


@dataclass(frozen=True)
class StudyPlan:
    """A study before anything is submitted: the job every run shares, the runs, the trainer's
    settings (each run's with its own per-device batch)."""

    base: JobRequest
    runs: tuple[tuple[Topology, int], ...]
    strong: bool
    trainer: TrainConfig
    repeats: int = 1
    target: scaling_table.Target | None = None

    @property
    def mode(self) -> str:
        return "strong" if self.strong else "weak"

    def jobs(self) -> list[tuple[int, Topology, int]]:
        """(repeat from 1, topology, per-device batch) in the order they are submitted: round
        by round, so that a burst of load on the node hits one repeat of several topologies,
        not every repeat of one."""
        return [(k, t, b) for k in range(1, self.repeats + 1) for t, b in self.runs]

    def as_dict(self) -> dict[str, Any]:
        from hpctrain.trainconfig.options import config_args

        return {"profile": self.base.profile.name, "mode": self.mode, "repeats": self.repeats,
                "target": self.target.label if self.target else None,
                "runs": [{"topology": t.label, "batch_per_device": b} for t, b in self.runs],
                "trainer_args": list(config_args(self.trainer))}

    def request(self, topo: Topology, batch: int) -> JobRequest:
        """One run's job: the shared one at this topology, with its per-device batch."""
        return replace(self.base, nodes=topo.nodes, gpus_per_node=topo.gpus_per_node,
                       job_name=f"{self.base.job_name}-{topo.label}", command=(),
                       trainer=with_batch(self.trainer, batch))


def study_dir(profile_dir: str, name: str | None) -> Path:
    """Where the study's table and plot go (its name's run directory)."""
    from hpctrain.submission.prepare import run_dir_for

    return run_dir_for(profile_dir, name or "scale", Path.cwd())


class StudySubmission(Studies):
    """A scaling study recorded, then its runs submitted; waiting between them is the
    reader's (studies/scaling_report.py)."""

    def start(self, plan: StudyPlan, name: str | None, output_dir: str) -> StudyRecord:
        """Record the study with every run 'not submitted yet' (a refused name: nothing); its
        table and plot go under `output_dir` on this machine, wherever the runs go."""
        from hpctrain.history import StudyRecord

        if name is not None and self.history.study(name) is not None:
            raise HpctrainError(f"a study named {name!r} exists already", "choose another --name")
        directory = study_dir(output_dir, name)
        _client, cluster = self.slurm()
        return self.history.add_study(StudyRecord(
            name=name or directory.name, profile=plan.base.profile.name, mode=plan.mode,
            directory=str(directory),
            runs=[scaling_table.run_record(t, b, None, cluster, None, "not submitted yet",
                                           repeat=k, target=plan.target)
                  for k, t, b in plan.jobs()]))

    def submit_run(self, run: StudyRun, target: scaling_table.Target | None = None,
                   study_id: int | None = None) -> dict[str, Any]:
        """Submit one prepared run; a refused one is recorded with its error, not hidden."""
        from hpctrain.submission.submit import submit

        _client, cluster = self.slurm()
        try:
            done = submit(run.job, self.place, self.history)
        except HpctrainError as e:
            return scaling_table.run_record(run.topology, run.batch, None, cluster, None,
                                            str(e), repeat=run.repeat, target=target)
        if study_id is not None:
            # The run's job belongs to the study: `status` counts it in the study's one row.
            self.history.set_study([done.record.id], study_id)
        return scaling_table.run_record(run.topology, run.batch, done.job_id, done.cluster,
                                        str(done.run_dir), repeat=run.repeat, target=target)

    def submit(self, study: StudyRecord, prepared: PreparedStudy, *, one_at_a_time: bool,
               timeout_s: float | None,
               on_run: Callable[[dict[str, Any]], None] = lambda run: None) -> None:
        """Submit the runs in order (`on_run` hears of each); one at a time, each waits until
        the one before has ended."""
        started = time.monotonic()
        runs = list(study.runs)
        for i, run in enumerate(prepared.runs):
            # A run that waited for the one before lists the project anew, as its own submit.
            run = _relisted(run) if one_at_a_time and i else run
            runs[i] = self.submit_run(run, prepared.plan.target, study.id)
            on_run(runs[i])
            self.history.update_study_runs(study.id or 0, runs)
            if one_at_a_time and runs[i]["job_id"] and i + 1 < len(prepared.runs):
                left = None if timeout_s is None else timeout_s - (time.monotonic() - started)
                self.wait(replace(study, runs=[runs[i]]), left)
        study.runs[:] = runs


def check_topologies(plan: StudyPlan) -> None:
    """Plan every topology's run; one PlanError with every impossible one's problems."""
    from hpctrain.errors import PlanError
    from hpctrain.plan import build_plan

    problems: list[str] = []
    for topo, batch in plan.runs:
        try:
            build_plan(plan.request(topo, batch), suggest=False)
        except PlanError as e:
            problems += [f"{topo.label}: {p}" for p in e.problems]
    # All or nothing, as --first-of: a study missing a topology compares less than was asked,
    # and its submitted runs would queue for nothing.
    if problems:
        raise PlanError([*problems, "(scale: every topology must be possible; drop or change "
                         "the ones above)"])


@dataclass(frozen=True)
class StudyRun:
    """One run of a study: its repeat (from 1), topology, per-device batch, and its job."""

    repeat: int
    topology: Topology
    batch: int
    job: Prepared

    @property
    def label(self) -> str:
        return f"{self.topology.label} #{self.repeat}"


@dataclass(frozen=True)
class PreparedStudy:
    """Every run of a study decided, in the order they are submitted (this is the dry run)."""

    plan: StudyPlan
    runs: tuple[StudyRun, ...]

    def scripts(self) -> tuple[Script, ...]:
        return tuple(Script(r.label, r.job.script_path, r.job.script, r.job.plan)
                     for r in self.runs)

    def run_dirs(self) -> tuple[RunDirPlan, ...]:
        return tuple(d for r in self.runs for d in r.job.run_dirs())

    def frozen_code(self) -> CodeSpec | None:
        return self.runs[0].job.frozen_code() if self.runs else None

    def needed_paths(self) -> tuple[str, ...]:
        return image_paths(self.scripts())

    def with_listing(self, checked: CodeSpec) -> PreparedStudy:
        return replace(self, runs=tuple(replace(r, job=r.job.with_listing(checked))
                                        for r in self.runs))

    @property
    def gpu_hours(self) -> float:
        """What the whole study reserves at most: every run's GPUs for its time limit."""
        return sum(r.job.plan.gpu_hours for r in self.runs)

    def as_dict(self) -> dict[str, Any]:
        return {**self.plan.as_dict(), "gpu_hours": round(self.gpu_hours, 2),
                "jobs": [{"topology": r.topology.label, "repeat": r.repeat,
                          "batch_per_device": r.batch, **r.job.as_dict()} for r in self.runs]}


def _relisted(run: StudyRun) -> StudyRun:
    """`run` with no listing of the project: its freeze lists the files as they are then."""
    code = run.job.code
    return run if code is None else replace(run, job=replace(run.job, code=replace(
        code, listing=None)))


def prepare_study(plan: StudyPlan, workdir: Path) -> PreparedStudy:
    """Every run's job (each its own run directory), once every topology is possible."""
    from hpctrain.submission.prepare import prepare

    check_topologies(plan)
    return PreparedStudy(plan, tuple(
        StudyRun(k, t, b, prepare(plan.request(t, b), workdir, environ=os.environ))
        for k, t, b in plan.jobs()))


@dataclass(frozen=True)
class StudyKind:
    """`scale`: `repeats` jobs per topology, recorded as a study; waiting and reporting are
    the reader's (studies/scaling_report.py)."""

    plan: StudyPlan
    name: str | None
    one_at_a_time: bool
    timeout_s: float | None
    # Told of the recorded study before its first run is submitted, then of each run.
    on_start: Callable[[StudyRecord], None] = lambda study: None
    on_run: Callable[[dict[str, Any]], None] = lambda run: None

    @property
    def runs_folder(self) -> str:
        return self.plan.base.profile.output_dir

    def prepare(self, place: Place) -> PreparedStudy:
        return prepare_study(replace(self.plan, base=place.adapt(self.plan.base)),
                             place.workdir)

    def execute(self, prepared: PreparedStudy, place: Place, history: History
                ) -> StudyRecord:
        studies = StudySubmission(history, place)
        # The plan as given: a login's adapted output_dir names a directory over there.
        study = studies.start(prepared.plan, self.name, self.plan.base.profile.output_dir)
        self.on_start(study)
        studies.submit(study, prepared, one_at_a_time=self.one_at_a_time,
                       timeout_s=self.timeout_s, on_run=self.on_run)
        return study
