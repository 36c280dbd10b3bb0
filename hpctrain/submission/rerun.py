"""`hpctrain rerun JOB`: the same script against the same code snapshot, in a new run directory.

The new script is the old one byte for byte but for the run directory's name (which every
path in it ends in), so the job runs the same code with the same settings; a job submitted
through a login is rerun there. With another topology (or time limit), the job's stored
request (request.json) is planned again with its own profile: same code, same settings,
a new script."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hpctrain import rundir
from hpctrain.errors import HpctrainError
from hpctrain.history import JobFacts, JobRecord, NewJob
from hpctrain.rundir import RunFile
from hpctrain.snapshots.spec import code_spec

if TYPE_CHECKING:
    from hpctrain.history import History
    from hpctrain.places import Place
    from hpctrain.plan import JobPlan
    from hpctrain.snapshots.store import Snapshot


@dataclass(frozen=True)
class Rerun:
    """What `rerun` did: the new job, its run directory, and the job it repeats."""

    job_id: str
    of: str
    run_dir: Path
    snapshot: Snapshot
    record: JobRecord

    def as_dict(self) -> dict[str, object]:
        return {"job_id": self.job_id, "rerun_of": self.of, "run_dir": str(self.run_dir),
                "snapshot": dataclasses.asdict(self.snapshot),
                "follow": [f"hpctrain status {self.job_id}", f"hpctrain logs -f {self.job_id}"]}


def _read(place: Place, path: Path) -> str:
    got = place.read_file(path, None)
    if got is None:
        raise HpctrainError(f"{path} is missing", "the run directory was removed; submit the "
                            "job again from the project")
    return got[0].decode("utf-8")


def _files(place: Place, old: Path, new: Path, script: str) -> tuple[RunFile, ...]:
    """The new run directory's files: the script, the profile, the request and the config's
    copy (the last two where the job has them)."""
    files = [RunFile(new / rundir.SCRIPT, text=script, mode=0o755),
             RunFile(new / rundir.PROFILE, text=_read(place, old / rundir.PROFILE))]
    for name in (rundir.REQUEST, *(f"{rundir.CONFIG_COPY}{suffix}"
                                   for suffix in (".yaml", ".yml", ".json"))):
        got = place.read_file(old / name, None)
        if got is not None:
            files.append(RunFile(new / name, text=got[0].decode("utf-8")))
    return tuple(files)


@dataclass(frozen=True)
class Changes:
    """What a rerun asks for differently (None: as the job had it)."""

    nodes: int | None = None
    gpus_per_node: int | None = None
    time: str | None = None

    def any(self) -> bool:
        return any(v is not None for v in dataclasses.astuple(self))


def rerun(record: JobRecord, place: Place, history: History,
          changes: Changes = Changes()) -> Rerun:
    """Submit `record`'s script again in a new run directory, against its snapshot."""
    from hpctrain.submission.prepare import run_dir_for

    if not record.snapshot or not record.run_dir or not record.script_path:
        raise HpctrainError(
            f"job {record.job_id} ran the project in place (no snapshot): what it ran is not "
            "known", "submit it again from the project")
    old = Path(record.run_dir)
    info = json.loads(_read(place, old / rundir.RUN_INFO))
    in_place = tuple((info.get("snapshot") or {}).get("in_place") or ())
    if changes.any():
        new, files, plan = _replanned(record, place, changes)
    else:
        new = run_dir_for(str(old.parent), record.job_name, Path(record.workdir))
        script = _read(place, Path(record.script_path))
        if old.name not in script:
            raise HpctrainError(f"{record.script_path} does not name its run directory",
                                "submit the job again from the project")
        files, plan = _files(place, old, new, script.replace(old.name, new.name)), None
    spec = code_spec(Path(record.workdir), new, in_place)
    place.create_run_dir(new, files)
    try:
        snapshot = place.link_code(spec, record.snapshot)
    except HpctrainError:
        place.discard(new)
        raise
    try:
        job_id = place.slurm_client().submit(new / rundir.SCRIPT, cwd=record.workdir)
    except HpctrainError:
        place.discard(new)  # nothing queued: no run directory that looks like a run
        raise
    done = _record(record, history, job_id, new, place.user, plan)
    info.update({"job_id": job_id, "rerun_of": record.job_id, "stdout": done.stdout_path,
                 "stderr": done.stderr_path})
    if plan is not None:
        info["plan"] = plan.summary()
    place.write(new / rundir.RUN_INFO, json.dumps(info, indent=2) + "\n")
    return Rerun(job_id, record.job_id, new, snapshot, done)


def _replanned(record: JobRecord, place: Place, changes: Changes
               ) -> tuple[Path, tuple[RunFile, ...], JobPlan]:
    """The job planned again from its request.json and profile, with `changes`: its new run
    directory, files (the config's copy carried over) and plan."""
    from hpctrain.plan.stored import request_from_json
    from hpctrain.profiles.loader import profile_from_text
    from hpctrain.submission.prepare import prepare

    old = Path(record.run_dir or "")
    got = place.read_file(old / rundir.REQUEST, None)
    if got is None:
        raise HpctrainError(
            f"job {record.job_id} kept no {rundir.REQUEST} (submitted by an older hpctrain): "
            "it cannot be planned with another topology",
            f"rerun it as it was (`hpctrain rerun {record.job_id}`), or submit it again")
    profile = profile_from_text(_read(place, old / rundir.PROFILE), str(old / rundir.PROFILE))
    req = request_from_json(got[0].decode("utf-8"), profile, str(old / rundir.REQUEST))
    # One job of a chain, its dependencies long met; the settings were read at submit (the
    # config's copy is carried over, never the project's file as it is now).
    req = dataclasses.replace(
        req, nodes=changes.nodes or req.nodes, time=changes.time or req.time,
        gpus_per_node=req.gpus_per_node if changes.gpus_per_node is None
        else changes.gpus_per_node, chain=1, after=(), config=None, snapshot=True)
    prep = prepare(place.adapt(req), Path(record.workdir), environ=os.environ)
    carried = [f for f in _files(place, old, prep.run_dir, prep.script)
               if f.path.name.startswith(rundir.CONFIG_COPY)]
    return prep.run_dir, (*prep.files, *carried), prep.plan


def _record(old: JobRecord, history: History, job_id: str, run_dir: Path, user: str,
            plan: JobPlan | None = None) -> JobRecord:
    from hpctrain.render import logs_in
    from hpctrain.submission.submit import expand_log_pattern

    logs = logs_in(str(run_dir))
    facts = {f.name: getattr(old, f.name) for f in dataclasses.fields(JobFacts)}
    facts.update(
        job_id=job_id, run_dir=str(run_dir), script_path=str(run_dir / rundir.SCRIPT),
        stdout_path=expand_log_pattern(logs.stdout, job_id, old.job_name, user),
        stderr_path=expand_log_pattern(logs.stderr, job_id, old.job_name, user),
        chain_head=None, segment=None, segments=None, race_head=None, race_of=None)
    if plan is not None:
        facts.update(partition=plan.partition, nodes=plan.nodes,
                     gpus_per_node=plan.gpus_per_node, total_gpus=plan.total_gpus,
                     command=list(plan.command), time_limit_s=plan.time_seconds)
    return history.add(NewJob(**facts))
