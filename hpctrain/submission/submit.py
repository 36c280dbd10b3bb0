"""Execute a prepared submission: run directory, sbatch --parsable, history row."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

from hpctrain import __version__
from hpctrain.errors import HistoryError, HpctrainError, SlurmError, SlurmUnavailableError
from hpctrain.history import History, JobRecord, NewJob
from hpctrain.places import GitState, Place
from hpctrain.plan import JobPlan
from hpctrain.slurm.runner import SlurmTimeoutError
from hpctrain.snapshots.model import Snapshot
from hpctrain.submission.prepare import Prepared, segment_options
from hpctrain.values import rundir
from hpctrain.values.rundir import RunDir


def expand_log_pattern(pattern: str, job_id: str, job_name: str, user: str,
                       task: str | None = None) -> str:
    """Expand SLURM's file-name patterns (%j %x %u %A %a %%) in one pass, as sbatch does;
    an array task's (`task`) with `job_id` its array's id."""
    table = {"j": job_id, "A": job_id, "x": job_name, "u": user, "%": "%",
             **({"a": task} if task is not None else {})}

    def sub(m: re.Match[str]) -> str:
        return table.get(m.group(1), m.group(0))

    return re.sub(r"%(.)", sub, pattern)


@dataclass(frozen=True)
class Origin:
    """Where a job's code comes from: the repository's state and the snapshot it runs."""

    git: GitState | None
    snapshot: Snapshot | None = None

    def as_dict(self) -> dict[str, object]:
        snap = self.snapshot
        return {"git": dataclasses.asdict(self.git) if self.git else None,
                "snapshot": dataclasses.asdict(snap) if snap else None}


@dataclass(frozen=True)
class Queued:
    """What SLURM and the repository said once sbatch accepted the job."""

    job_id: str
    cluster: str
    stdout_path: str
    stderr_path: str
    origin: Origin

    @property
    def git(self) -> GitState | None:
        return self.origin.git


@dataclass(frozen=True)
class Submitted:
    """A job SLURM accepted: id, cluster, run directory, logs and git state."""

    job_id: str
    cluster: str
    run_dir: Path
    script_path: Path
    stdout_path: str | None
    stderr_path: str | None
    git: GitState | None
    record: JobRecord
    # Every job id of a chain, the first one included; just (job_id,) otherwise.
    chain: tuple[str, ...] = ()
    snapshot: Snapshot | None = None
    # A rerun's: the job it repeats.
    rerun_of: str | None = None

    def as_dict(self, plan: JobPlan) -> dict[str, object]:
        again = {"rerun_of": self.rerun_of} if self.rerun_of else {}
        return {**again,
            "job_id": self.job_id,
            "cluster": self.cluster,
            "run_dir": str(self.run_dir),
            "script": str(self.script_path),
            "stdout": self.stdout_path,
            "stderr": self.stderr_path,
            "git": dataclasses.asdict(self.git) if self.git else None,
            "snapshot": dataclasses.asdict(self.snapshot) if self.snapshot else None,
            "plan": plan.summary(),
            "chain": list(self.chain) if len(self.chain) > 1 else None,
            "follow": [f"hpctrain status {self.job_id}", f"hpctrain logs -f {self.job_id}"],
        }


# The packaged trainer's imports, and the extra of pyproject.toml that installs them.
TRAINER_MODULES = ("hpctrain", "torch", "lightning")
TRAINER_EXTRA = "hpctrain[train]"
# Seconds a Python may take to start at the place (a cold NFS home is slow); past them the
# check gives way to the job itself, which says the same in its log.
PYTHON_CHECK_S = 30.0
# Prints the modules it cannot find. find_spec imports no module: torch alone takes seconds.
_FIND_MODULES = """\
import importlib.util, sys
def missing(name):
    try:
        return importlib.util.find_spec(name) is None
    except Exception:
        return True
print(" ".join(m for m in sys.argv[1:] if missing(m)))
"""


def install_trainer(python: str) -> str:
    """How to give `python` the packaged trainer's packages."""
    return (f"{python} -m pip install '{TRAINER_EXTRA}' (from a checkout of hpctrain: "
            "pip install '.[train]')")


def trainer_missing(error: ModuleNotFoundError) -> bool:
    """True when `error` is the packaged trainer's own packages missing (a core install)."""
    return (error.name or "").split(".")[0] in TRAINER_MODULES


def _job_python(plan: JobPlan) -> str | None:
    """The Python the job's script activates (None: the job's PATH decides, after its modules
    and set-up lines, which a check from here cannot tell)."""
    return plan.python_env.rstrip("/") + "/bin/python" if plan.python_env else None


def _quoted(path: str) -> str:
    """A path for `sh -c`, a leading ~/ left to the shell (a login's python_env)."""
    import shlex

    return '"$HOME"/' + shlex.quote(path[2:]) if path.startswith("~/") else shlex.quote(path)


def check_trainer_python(prep: Prepared, place: Place) -> None:
    """Refuse to queue the packaged trainer where the job's Python cannot import it."""
    import shlex
    import subprocess

    from hpctrain.plan.restart import runs_trainer

    python = _job_python(prep.plan)
    if python is None or not runs_trainer(prep.plan.command):
        return
    script = (f"exec {_quoted(python)} -c {shlex.quote(_FIND_MODULES)} "
              f"{' '.join(TRAINER_MODULES)}")
    try:
        out, err, code = place.slurm_client().transport.execute(
            ("sh", "-c", script), None, PYTHON_CHECK_S, str(prep.workdir))
    except subprocess.TimeoutExpired:
        return
    where = place.where
    fix = (f"install the trainer into it: {install_trainer(shlex.quote(python))}; or name "
           "an environment that has it with --python-env")
    if code != 0:
        said = (err or out).strip().splitlines()
        raise HpctrainError(f"the job's Python {python} does not run {where}: "
                            f"{said[-1] if said else f'exit {code}'}", fix)
    if missing := out.split():
        raise HpctrainError(
            f"the job's Python {python} cannot import {', '.join(missing)} {where}: the "
            "packaged trainer needs hpctrain with torch and Lightning", fix)


def create_run_dir(prep: Prepared, place: Place) -> Origin:
    """Make the run directory with its files and the job's code at `place` (the pipeline
    checked its files)."""
    check_trainer_python(prep, place)
    place.create_run_dir(prep.run_dir, prep.files)
    try:
        snapshot = _code(prep, place)
        if prep.again is not None:
            # A rerun runs its job's snapshot: the project as it is now is not its code.
            return Origin(prep.again.git, snapshot)
        git = place.git()
        if git is not None and git.dirty and (diff := place.git_diff()):
            # What the commit in run.json lacks, in git's words (the snapshot holds it too).
            place.write(RunDir(prep.run_dir).git_diff, diff)
    except (HpctrainError, OSError) as e:
        # Nothing is queued yet: leave no run directory behind that looks like a run.
        place.discard(prep.run_dir)
        if isinstance(e, OSError):
            raise HpctrainError(f"cannot write {prep.run_dir}: {e.strerror}",
                                "check that the runs folder is writable") from None
        raise
    return Origin(git, snapshot)


def _code(prep: Prepared, place: Place) -> Snapshot | None:
    """The job's working directory: the project frozen now, or a rerun's snapshot linked."""
    if prep.code is None:
        return None
    if prep.again is not None:
        return place.link_code(prep.code, prep.again.snapshot)
    return place.freeze_code(prep.code)


def _sbatch(prep: Prepared, place: Place, previous: str | None = None) -> str:
    try:
        return place.slurm_client().submit(prep.script_path, cwd=prep.workdir,
                             options=segment_options(prep.plan, previous))
    except SlurmTimeoutError as e:
        # sbatch may have queued the job before it timed out; its logs need the directory.
        with contextlib.suppress(OSError, HpctrainError):
            place.write(RunDir(prep.run_dir).unconfirmed, f"{e.what}\n")
        raise SlurmTimeoutError(
            f"{e.what} (run directory {prep.run_dir} kept, marked {rundir.UNCONFIRMED})", e.fix
        ) from None
    except HpctrainError as e:
        if previous is not None:
            # Earlier segments are queued and use the run directory: keep it, say what ran.
            raise HpctrainError(
                f"{e.what}; the chain stops after job {previous}, which is queued",
                f"cancel the queued part with `hpctrain cancel {previous}`, or let it run",
            ) from None
        # Nothing was queued: leave no run directory behind that looks like a run.
        place.discard(prep.run_dir)
        raise dev_cluster_refusal(e, prep.plan, place) from None


def dev_cluster_refusal(error: HpctrainError, plan: JobPlan, place: Place) -> HpctrainError:
    """sbatch's refusal where the SLURM asked is the dev cluster and it emulates another
    profile than the job's, or fewer nodes than it asks: the fix that makes them agree (SLURM's
    "invalid partition specified: gpudev" says neither)."""
    if not isinstance(error, SlurmError) or isinstance(error, SlurmUnavailableError):
        return error
    state = _dev_cluster_state(place)
    if state is None:
        return error
    emulated, nodes = state.get("profile"), state.get("nodes_per_partition")
    if emulated and emulated != plan.profile:
        fix = (f"the dev cluster emulates profile {emulated}, not {plan.profile}: `hpctrain "
               f"devcluster up --profile {plan.profile} --replace`, or submit with -P {emulated}")
    elif isinstance(nodes, int) and plan.nodes > nodes:
        fix = (f"the dev cluster has {nodes} node(s) of each type, the job asks for "
               f"{plan.nodes}: `hpctrain devcluster up --profile {plan.profile} --nodes "
               f"{plan.nodes} --replace`, or submit with --nodes {nodes}")
    else:
        return error
    return type(error)(error.what, fix)


def _dev_cluster_state(place: Place) -> dict[str, object] | None:
    """The dev cluster's state.json, where the place's SLURM is the dev cluster here (a
    login's slurm.conf is none readable from here)."""
    from hpctrain.devcluster import DevCluster

    cluster = DevCluster()
    conf = place.slurm_client().transport.conf_path()
    if conf is None or Path(conf).resolve() != cluster.layout.slurm_conf.resolve():
        return None
    return cluster.read_state() or None


def _write_run_info(prep: Prepared, done: Queued, place: Place) -> None:
    info = {
        "job_id": done.job_id,
        "cluster": done.cluster,
        "hpctrain_version": __version__,
        "invocation": prep.plan.invocation,
        "workdir": str(prep.workdir),
        **done.origin.as_dict(),
        "plan": prep.plan.summary(),
        "stdout": done.stdout_path,
        "stderr": done.stderr_path,
        **({"rerun_of": prep.again.of} if prep.again else {}),
    }
    # The history row holds the same facts; the job is queued either way.
    with contextlib.suppress(OSError, HpctrainError):
        place.write(RunDir(prep.run_dir).run_info, json.dumps(info, indent=2) + "\n")


def new_job(prep: Prepared, done: Queued, place: Place, head: str | None, segment: int
            ) -> NewJob:
    """The history row of a queued job, as submit knows it (a sweep's point adds its own)."""
    plan = prep.plan
    chained = plan.chain > 1
    return NewJob(
        chain_head=(head or done.job_id) if chained else None,
        segment=segment if chained else None, segments=plan.chain if chained else None,
        job_id=done.job_id, cluster=done.cluster, profile=plan.profile, job_name=plan.job_name,
        partition=plan.partition, nodes=plan.nodes, gpus_per_node=plan.gpus_per_node,
        total_gpus=plan.total_gpus, command=list(plan.command), run_dir=str(prep.run_dir),
        script_path=str(prep.script_path), stdout_path=done.stdout_path,
        stderr_path=done.stderr_path, workdir=str(prep.workdir),
        git_commit=done.git.commit if done.git else None,
        git_dirty=done.git.dirty if done.git else None, time_limit_s=plan.time_seconds,
        login=place.login, login_config=place.login_config,
        snapshot=done.origin.snapshot.id if done.origin.snapshot else None,
    )


def record_job(prep: Prepared, done: Queued, history: History, place: Place, *,
               head: str | None = None, segment: int = 1, race_of: str | None = None
               ) -> JobRecord:
    """The history row of one queued job (a chain's segment, a race's alternative)."""
    new = new_job(prep, done, place, head, segment)
    if race_of is not None:
        new = dataclasses.replace(new, race_head=head, race_of=race_of)
    try:
        return history.add(new)
    except HistoryError as e:
        raise HistoryError(
            f"job {done.job_id} was submitted (run directory {prep.run_dir}) but not recorded: "
            f"{e.what}",
            f"follow it with squeue -j {done.job_id}; {e.fix}" if e.fix else None,
        ) from None


def queued(prep: Prepared, place: Place, job_id: str, origin: Origin) -> Queued:
    """What sbatch's answer means for `prep`: the cluster and the log files, expanded."""
    name = prep.plan.job_name
    return Queued(
        job_id=job_id, cluster=place.slurm_client().cluster_name() or prep.plan.cluster,
        stdout_path=expand_log_pattern(prep.logs.stdout, job_id, name, place.user),
        stderr_path=expand_log_pattern(prep.logs.stderr, job_id, name, place.user),
        origin=origin,
    )


def submit(prep: Prepared, place: Place, history: History) -> Submitted:
    """Create the run directory, sbatch the script, record the job; on refusal undo it all.

    A chain (`plan.chain` > 1) queues that many jobs, each after the one before.
    """
    origin = create_run_dir(prep, place)
    first = queued(prep, place, _sbatch(prep, place), origin)
    _write_run_info(prep, first, place)
    record = record_job(prep, first, history, place)
    chain = [first.job_id]
    for segment in range(2, prep.plan.chain + 1):
        later = queued(prep, place, _sbatch(prep, place, chain[-1]), origin)
        record_job(prep, later, history, place, head=first.job_id, segment=segment)
        chain.append(later.job_id)
    return Submitted(
        job_id=first.job_id, cluster=first.cluster, run_dir=prep.run_dir,
        script_path=prep.script_path, stdout_path=first.stdout_path,
        stderr_path=first.stderr_path, git=origin.git, record=record, chain=tuple(chain),
        snapshot=origin.snapshot, rerun_of=prep.again.of if prep.again else None,
    )
