"""`hpctrain dev`: a dev job as a submission kind, the wait for its shell's environment, and
`dev-run`, the job's launch run again inside the allocation (docs/dev.md).

A dev job is the batch job of the same request (plan/dev.py): its script sets up the same
environment, then writes it for the shell and waits instead of launching the command
(templates/sbatch.sh.j2). It is queued and recorded as any submit, so `status`, `why` and
`cancel` know it; its run directory keeps request.json, from which `dev-run` plans the launch
and `submit --like-dev` the batch job.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hpctrain.errors import HpctrainError
from hpctrain.submission.prepare import Prepared, prepare
from hpctrain.values.rundir import RunDir

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord
    from hpctrain.places import Place
    from hpctrain.plan import JobPlan, JobRequest
    from hpctrain.submission.kinds import JobKind
    from hpctrain.submission.rerun import Changes
    from hpctrain.submission.submit import Submitted
    from hpctrain.tracking.watcher import JobWatcher


@dataclass(frozen=True)
class DevKind:
    """`dev`: the request's allocation and environment, held for an interactive shell."""

    request: JobRequest

    @property
    def runs_folder(self) -> str:
        return self.request.profile.output_dir

    def prepare(self, place: Place) -> Prepared:
        # The code as it is now, where the shell starts: no snapshot.
        req = dataclasses.replace(self.request, dev=True, snapshot=False, in_place=(),
                                  chain=1, after=())
        return prepare(place.adapt(req), place.workdir, environ=os.environ)

    def execute(self, prepared: Prepared, place: Place, history: History) -> Submitted:
        from hpctrain.submission.submit import submit

        return submit(prepared, place, history)


def wait_ready(done: Submitted, place: Place, watcher: JobWatcher,
               sleep: Callable[[float], None] = time.sleep,
               clock: Callable[[], float] = time.monotonic) -> Path:
    """The dev shell's start-up file, once the job wrote the environment; HpctrainError if the
    job ended first."""
    run = RunDir(done.run_dir)
    record, asked_at = done.record, clock()
    while place.read_file(run.dev_env, None) is None:
        # The file is read often (it is the prompt's delay); SLURM once a second at most.
        if clock() - asked_at >= 1.0:
            poll, asked_at = watcher.poll(record), clock()
            record = poll.record
            if poll.done:
                raise HpctrainError(
                    f"dev job {done.job_id} ended {record.state} before its shell could start",
                    f"read its output: {done.stdout_path} and {done.stderr_path}; or "
                    f"`hpctrain why {done.job_id}`")
        sleep(0.05)
    return run.dev_rc


def dev_request(run_dir: Path) -> JobRequest:
    """The dev job's request as its run directory kept it (request.json, profile.yaml); read
    inside the job, where the run directory is."""
    from hpctrain.plan.stored import request_from_json
    from hpctrain.profiles.loader import profile_from_text

    run = RunDir(run_dir)
    try:
        profile, request = (p.read_text(encoding="utf-8") for p in (run.profile, run.request))
    except OSError:
        raise HpctrainError(f"{run_dir} keeps no {run.request.name} and {run.profile.name}",
                            "is it a dev job's run directory? start one with `hpctrain dev`"
                            ) from None
    req = request_from_json(request, profile_from_text(profile, str(run.profile)),
                            str(run.request))
    if not req.dev:
        raise HpctrainError(f"{run_dir} is a batch job's run directory, not a dev job's",
                            "`hpctrain rerun JOB` submits a batch job again")
    return req


def run_plan(req: JobRequest, command: tuple[str, ...], run_dir: Path) -> JobPlan:
    """The launch of `req` (or of `command` instead of its command) as a batch job of the same
    allocation would run it, into `run_dir`, without what belongs to the batch job itself (its
    time limit's warning, the monitor, restarts)."""
    from hpctrain.plan import build_plan

    if command:
        req = dataclasses.replace(req, command=command, trainer=None, trainer_args=(),
                                  config=None)
    req = dataclasses.replace(req, dev=False, snapshot=False, code_dir=None, chain=1,
                              run_dir=str(run_dir), log_dir=str(run_dir), monitor_interval_s=None)
    plan = build_plan(req)
    return dataclasses.replace(plan, grace_s=None, requeue=False, restarts=0, retries=0)


def next_run_dir(dev_run_dir: Path) -> Path:
    """The next `dev-run`'s own directory (001, 002, ...), made now."""
    for number in range(1, 10000):
        path = RunDir(dev_run_dir).dev_run(number).root
        try:
            path.mkdir(parents=True)
        except FileExistsError:
            continue
        return path
    raise HpctrainError(f"{RunDir(dev_run_dir).dev_runs} is full", "start a new dev job")


def like_dev(record: JobRecord, place: Place, changes: Changes, history: History) -> JobKind:
    """`submit --like-dev JOB`: the dev job's request as a batch job, on a snapshot of the
    project as it is now (here), after the questions every submit asks."""
    from hpctrain.plan.dev import batch_request
    from hpctrain.submission.kinds import JobKind
    from hpctrain.submission.questions import before_submit
    from hpctrain.submission.rerun import stored_request

    req = stored_request(record, place, changes)
    if not req.dev:
        raise HpctrainError(f"job {record.job_id} is a batch job, not a dev job",
                            f"`hpctrain rerun {record.job_id}` submits it again")
    return JobKind(before_submit(batch_request(req), place, history))
