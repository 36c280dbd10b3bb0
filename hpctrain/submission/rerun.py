"""`hpctrain rerun JOB`: the job planned again from what its run directory kept, on its code
snapshot, in a new run directory.

The job's request (request.json) and resolved profile (profile.yaml) are planned as any submit
plans them, so the script is the job's own but for the run directory's name: the same code
(the snapshot is linked, the project as it is now is never read), the same settings (the
trainer's were resolved at submit; the config file's copy is carried over). With --nodes,
--gpus-per-node or --time the same job gets another topology or time limit. A job submitted
through a login is rerun there; a dry run shows the script and writes nothing."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hpctrain.errors import HpctrainError
from hpctrain.places import GitState
from hpctrain.submission.prepare import Again, Prepared, prepare
from hpctrain.values import rundir
from hpctrain.values.rundir import RunDir, RunFile

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord
    from hpctrain.places import Place
    from hpctrain.plan import JobRequest
    from hpctrain.submission.submit import Submitted


@dataclass(frozen=True)
class Changes:
    """What a rerun asks for differently (None: as the job had it)."""

    nodes: int | None = None
    gpus_per_node: int | None = None
    time: str | None = None

    def any(self) -> bool:
        return any(v is not None for v in dataclasses.astuple(self))


@dataclass(frozen=True)
class RerunKind:
    """`rerun`: a recorded job again, on its snapshot, in a new run directory."""

    record: JobRecord
    changes: Changes = Changes()
    # The project is not brought to the place: the job runs its snapshot, already there.
    runs_folder: str | None = None
    # Where the quarantine is kept: with it, the rerun asks what every submit asks first.
    history: History | None = None

    def prepare(self, place: Place) -> Prepared:
        return prepare_rerun(self.record, place, self.changes, self.history)

    def execute(self, prepared: Prepared, place: Place, history: History) -> Submitted:
        from hpctrain.submission.submit import submit

        return submit(prepared, place, history)


def _read(place: Place, path: Path) -> str | None:
    got = place.read_file(path, None)
    return None if got is None else got[0].decode("utf-8")


def stored_request(record: JobRecord, place: Place, changes: Changes) -> JobRequest:
    """The job's request as its run directory kept it, with `changes`, as one job."""
    from hpctrain.plan.stored import request_from_json
    from hpctrain.profiles.loader import profile_from_text

    old = RunDir(record.run_dir or "")
    profile = _read(place, old.profile)
    if profile is None:
        raise HpctrainError(f"{old.profile} is missing", "the run directory was "
                            "removed; submit the job again from the project")
    request = _read(place, old.request)
    if request is None:
        raise HpctrainError(
            f"job {record.job_id} kept no {rundir.REQUEST} (submitted by an older hpctrain): "
            "it cannot be planned again", "submit it again from the project")
    req = request_from_json(request, profile_from_text(profile, str(old.profile)),
                            str(old.request))
    # A race's alternatives keep the first one's request: the topology (and the partition,
    # which an alternative may name) is the record's.
    nodes, gpus = ((record.nodes, record.gpus_per_node) if record.race_of
                   else (req.nodes, req.gpus_per_node))
    if record.race_of and record.partition:
        req = dataclasses.replace(req, partition=record.partition)
    # One job, its dependencies long met; the settings were read at submit (the config's
    # copy is carried over, never the project's file as it is now). Not adapted to the place
    # again: the request was kept as the place had adapted it (its Python, its paths).
    return dataclasses.replace(
        req, nodes=nodes if changes.nodes is None else changes.nodes,
        time=changes.time or req.time,
        gpus_per_node=gpus if changes.gpus_per_node is None else changes.gpus_per_node,
        chain=1, after=(), config=None, snapshot=True)


def prepare_rerun(record: JobRecord, place: Place, changes: Changes = Changes(),
                  history: History | None = None) -> Prepared:
    """The rerun as a value: the job planned again (after the questions every submit asks,
    where `history` is given), its new run directory, the files it carries over (the config's
    copy, git.diff) and the snapshot it links."""
    if not record.snapshot or not record.run_dir:
        raise HpctrainError(
            f"job {record.job_id} ran the project in place (no snapshot): what it ran is not "
            "known", "submit it again from the project")
    req = stored_request(record, place, changes)
    if history is not None:
        from hpctrain.submission.questions import before_submit

        req = before_submit(req, place, history)
    prep = prepare(req, Path(record.workdir), environ=os.environ)
    git = (GitState(record.git_commit, bool(record.git_dirty)) if record.git_commit
           else None)
    return dataclasses.replace(prep, files=(*prep.files, *_carried(record, place, prep)),
                               again=Again(record.job_id, record.snapshot, git))


def _carried(record: JobRecord, place: Place, prep: Prepared) -> tuple[RunFile, ...]:
    """The old run directory's copies of what the job ran with: its config file's, the work
    tree's changes against its commit."""
    old = Path(record.run_dir or "")
    names = (*(f"{rundir.CONFIG_COPY}{suffix}" for suffix in (".yaml", ".yml", ".json")),
             rundir.GIT_DIFF)
    found = ((name, _read(place, old / name)) for name in names)
    tracker = RunFile(RunDir(prep.run_dir).tracker_run, text=rerun_origin(
        record.job_id, old, _read(place, RunDir(old).tracker_run)))
    return (*(RunFile(prep.run_dir / name, text=text) for name, text in found
              if text is not None), tracker)


def rerun_origin(job_id: str, run_dir: Path, tracker_text: str | None) -> str:
    """The rerun's tracker file before its first start: the run it repeats, by job, run
    directory and tracker run id. The trainer adds the rerun's own id: a rerun is a new run."""
    try:
        old = json.loads(tracker_text) if tracker_text else {}
    except ValueError:
        old = {}
    old_id = old.get("id") if isinstance(old, dict) else None
    origin = {"job_id": job_id, "run_dir": str(run_dir),
              "tracker_run_id": old_id if isinstance(old_id, str) else None}
    return json.dumps({"rerun_of": origin}, indent=2) + "\n"
