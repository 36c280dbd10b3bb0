"""`hpctrain rerun JOB`: the same script against the same code snapshot, in a new run directory.

The new script is the old one byte for byte but for the run directory's name (which every
path in it ends in), so the job runs the same code with the same settings; a job submitted
through a login is rerun there."""

from __future__ import annotations

import dataclasses
import json
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
    """The new run directory's files: the script, the profile and the config's copy."""
    files = [RunFile(new / rundir.SCRIPT, text=script, mode=0o755),
             RunFile(new / rundir.PROFILE, text=_read(place, old / rundir.PROFILE))]
    for suffix in (".yaml", ".yml", ".json"):
        got = place.read_file(old / f"{rundir.CONFIG_COPY}{suffix}", None)
        if got is not None:
            files.append(RunFile(new / f"{rundir.CONFIG_COPY}{suffix}",
                                 text=got[0].decode("utf-8")))
    return tuple(files)


def rerun(record: JobRecord, place: Place, history: History) -> Rerun:
    """Submit `record`'s script again in a new run directory, against its snapshot."""
    from hpctrain.jobs.prepare import run_dir_for

    if not record.snapshot or not record.run_dir or not record.script_path:
        raise HpctrainError(
            f"job {record.job_id} ran the project in place (no snapshot): what it ran is not "
            "known", "submit it again from the project")
    old = Path(record.run_dir)
    new = run_dir_for(str(old.parent), record.job_name, Path(record.workdir))
    script = _read(place, Path(record.script_path))
    if old.name not in script:
        raise HpctrainError(f"{record.script_path} does not name its run directory",
                            "submit the job again from the project")
    script = script.replace(old.name, new.name)
    info = json.loads(_read(place, old / rundir.RUN_INFO))
    in_place = tuple((info.get("snapshot") or {}).get("in_place") or ())
    spec = code_spec(Path(record.workdir), new, in_place)
    place.create_run_dir(new, _files(place, old, new, script))
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
    done = _record(record, history, job_id, new, place.user)
    info.update({"job_id": job_id, "rerun_of": record.job_id, "stdout": done.stdout_path,
                 "stderr": done.stderr_path})
    place.write(new / rundir.RUN_INFO, json.dumps(info, indent=2) + "\n")
    return Rerun(job_id, record.job_id, new, snapshot, done)


def _record(old: JobRecord, history: History, job_id: str, run_dir: Path, user: str
            ) -> JobRecord:
    from hpctrain.jobs.submit import expand_log_pattern
    from hpctrain.render import logs_in

    logs = logs_in(str(run_dir))
    facts = {f.name: getattr(old, f.name) for f in dataclasses.fields(JobFacts)}
    facts.update(
        job_id=job_id, run_dir=str(run_dir), script_path=str(run_dir / rundir.SCRIPT),
        stdout_path=expand_log_pattern(logs.stdout, job_id, old.job_name, user),
        stderr_path=expand_log_pattern(logs.stderr, job_id, old.job_name, user),
        chain_head=None, segment=None, segments=None, race_head=None, race_of=None)
    return history.add(NewJob(**facts))
