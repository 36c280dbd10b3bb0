"""Plan a submission as a value: plan, script, sbatch argv, run directory, files, log patterns."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hpctrain.plan import JobPlan, JobRequest
from hpctrain.plan.container import anchored
from hpctrain.render.script import LogPatterns, log_patterns, plan_script
from hpctrain.snapshots.spec import CodeSpec, code_spec
from hpctrain.submission.planned import RunDirPlan, Script, image_paths
from hpctrain.values import rundir
from hpctrain.values.rundir import RunDir, RunFile

if TYPE_CHECKING:
    from datetime import datetime

    from hpctrain.places import GitState


_DIR_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def run_dir_for(
    output_dir: str, job_name: str, cwd: Path, now: datetime | None = None,
    token: str | None = None,
) -> Path:
    """`<output_dir>/<job-name>-<UTC timestamp>-<random>`, absolute (output_dir is cwd-relative)."""
    # datetime is imported here, not by `render`, which never makes a run directory.
    from datetime import datetime, timezone

    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    name = _DIR_UNSAFE.sub("_", job_name).strip("._") or "job"
    return rundir.runs_folder(output_dir, cwd) / f"{name}-{stamp}-{token or os.urandom(3).hex()}"


@dataclass(frozen=True)
class Again:
    """A rerun's origin: the job it repeats, the snapshot that job ran, its repository state."""

    of: str
    snapshot: str
    git: GitState | None


@dataclass(frozen=True)
class Prepared:
    """Everything submit will do, decided before anything is written (this is the dry run)."""

    plan: JobPlan
    script: str
    run_dir: Path
    workdir: Path
    files: tuple[RunFile, ...]
    sbatch_argv: tuple[str, ...]
    logs: LogPatterns
    # Racing alternatives share a run directory, each with its own script (job-1x2.sbatch).
    script_name: str = rundir.SCRIPT
    # The project's snapshot the job runs in (None: --no-snapshot, it runs in workdir).
    code: CodeSpec | None = None
    # A rerun: `code` links the job's snapshot from the store; the project is not frozen.
    again: Again | None = None

    @property
    def script_path(self) -> Path:
        return self.run_dir / self.script_name

    def scripts(self) -> tuple[Script, ...]:
        return (Script(self.plan.race or self.script_name, self.script_path, self.script,
                       self.plan),)

    def run_dirs(self) -> tuple[RunDirPlan, ...]:
        return (RunDirPlan(self.run_dir, self.files),)

    def frozen_code(self) -> CodeSpec | None:
        return self.code if self.again is None else None

    def needed_paths(self) -> tuple[str, ...]:
        return image_paths(self.scripts())

    def with_listing(self, checked: CodeSpec) -> Prepared:
        return dataclasses.replace(self, code=listed(self.code, checked))

    def as_dict(self) -> dict[str, object]:
        return {
            "run_dir": str(self.run_dir),
            "script": str(self.script_path),
            "workdir": str(self.workdir),
            "code": self.code.as_dict() if self.code else None,
            "plan": self.plan.summary(),
            "segments": [list(segment_options(self.plan, None if i == 0 else f"<job {i}>"))
                         for i in range(self.plan.chain)],
        }


def listed(spec: CodeSpec | None, checked: CodeSpec) -> CodeSpec | None:
    """`spec` with the files `checked` listed: a project checked once serves every script
    of one submission (each its own working directory, one project)."""
    return None if spec is None else dataclasses.replace(spec, listing=checked.listing)


def segment_options(plan: JobPlan, previous: str | None) -> tuple[str, ...]:
    """sbatch options of one job: the first waits for --after jobs, the next for its forerunner."""
    if previous is not None:
        # afterany: a segment that ran out of time (or failed) still hands the run on.
        return (f"--dependency=afterany:{previous}",)
    if plan.after:
        return ("--dependency=afterok:" + ":".join(plan.after),)
    return ()


def _run_files(req: JobRequest, run_dir: Path, workdir: Path, script: str,
               script_name: str = rundir.SCRIPT, environ: Mapping[str, str] | None = None
               ) -> tuple[RunFile, ...]:
    from hpctrain.files import yamlwrite
    from hpctrain.plan.stored import request_json
    from hpctrain.render.script import check_no_secrets

    request = request_json(req)
    check_no_secrets(request, environ or {})
    files = [
        RunFile(run_dir / script_name, text=script, mode=0o755),
        RunFile(RunDir(run_dir).profile,
                text=yamlwrite.dump(dataclasses.asdict(req.profile))),
        # A race's alternatives share it: the first one's, the topology aside.
        RunFile(RunDir(run_dir).request, text=request),
    ]
    if req.config:
        config = workdir / req.config
        files.append(RunFile(run_dir / f"{rundir.CONFIG_COPY}{config.suffix}",
                             copy_of=config))
    return tuple(files)


def prepare(
    req: JobRequest, workdir: Path, *, environ: Mapping[str, str] | None = None,
    now: datetime | None = None, token: str | None = None, script_name: str = rundir.SCRIPT,
) -> Prepared:
    """Decide a submission from `workdir` without touching the filesystem or SLURM."""
    req = anchored(req, workdir)
    run_dir = run_dir_for(req.profile.output_dir, req.job_name, workdir, now, token)
    code = code_spec(workdir, run_dir, tuple(req.in_place)) if req.snapshot else None
    # A sweep's array tasks log into one folder; each point's run directory is its own.
    logs = RunDir(run_dir).sweep_logs if req.array else run_dir
    req = dataclasses.replace(req, log_dir=str(logs), run_dir=str(run_dir),
                              code_dir=str(code.code_dir) if code else None)
    plan, script = plan_script(req, environ=environ)
    return Prepared(
        plan=plan, script=script, run_dir=run_dir, workdir=workdir,
        files=_run_files(req, run_dir, workdir, script, script_name, environ),
        sbatch_argv=("sbatch", "--parsable", *segment_options(plan, None),
                     str(run_dir / script_name)),
        logs=log_patterns(plan), script_name=script_name, code=code,
    )
