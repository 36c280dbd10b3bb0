"""Execute a prepared submission: run directory, sbatch --parsable, history row."""

from __future__ import annotations

import contextlib
import dataclasses
import getpass
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from hpctrain import __version__, rundir
from hpctrain.errors import HistoryError, HpctrainError
from hpctrain.history import History, JobRecord, NewJob
from hpctrain.jobs.prepare import Prepared, segment_options
from hpctrain.plan import JobPlan
from hpctrain.slurm.client import SlurmClient, SlurmTimeoutError

GIT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class GitState:
    commit: str
    dirty: bool


def git_state(cwd: Path) -> GitState | None:
    """The commit and dirty flag of the repository around `cwd`; None outside one (or no git)."""
    def git(*args: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(
                ["git", "-C", str(cwd), *args], capture_output=True, text=True,
                timeout=GIT_TIMEOUT_S, check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None

    head = git("rev-parse", "--verify", "--quiet", "HEAD")
    if head is None or head.returncode != 0 or not head.stdout.strip():
        return None
    # Untracked files do not count: run directories and data would make every repo dirty.
    status = git("status", "--porcelain", "--untracked-files=no")
    dirty = status is None or status.returncode != 0 or bool(status.stdout.strip())
    return GitState(commit=head.stdout.strip(), dirty=dirty)


def expand_log_pattern(pattern: str, job_id: str, job_name: str, user: str) -> str:
    """Expand SLURM's file-name patterns (%j %x %u %A %%) in one pass, as sbatch does."""
    table = {"j": job_id, "A": job_id, "x": job_name, "u": user, "%": "%"}

    def sub(m: re.Match[str]) -> str:
        return table.get(m.group(1), m.group(0))

    return re.sub(r"%(.)", sub, pattern)


class RunSite(Protocol):
    """Where the run directory lives when not on this machine (a login: hpctrain.remote)."""

    @property
    def login(self) -> str: ...

    @property
    def login_config(self) -> str | None: ...

    def create(self, prep: Prepared) -> None: ...

    def write(self, path: Path, text: str) -> None: ...

    def discard(self, prep: Prepared) -> None: ...

    def git(self) -> GitState | None: ...


def _write_local(path: Path, text: str) -> None:
    path.write_text(text)


@dataclass(frozen=True)
class Queued:
    """What SLURM and the repository said once sbatch accepted the job."""

    job_id: str
    cluster: str
    stdout_path: str
    stderr_path: str
    git: GitState | None


@dataclass(frozen=True)
class Submitted:
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

    def as_dict(self, plan: JobPlan) -> dict[str, object]:
        return {
            "job_id": self.job_id,
            "cluster": self.cluster,
            "run_dir": str(self.run_dir),
            "script": str(self.script_path),
            "stdout": self.stdout_path,
            "stderr": self.stderr_path,
            "git": dataclasses.asdict(self.git) if self.git else None,
            "plan": plan.summary(),
            "chain": list(self.chain) if len(self.chain) > 1 else None,
            "follow": [f"hpctrain status {self.job_id}", f"hpctrain logs -f {self.job_id}"],
        }


def check_submission(prep: Prepared) -> None:
    """Every check submit makes before it writes or queues anything; the dry run makes them too."""
    for f in prep.files:
        if f.copy_of is not None:
            _check_config(f.copy_of)
    _check_run_dir(prep.run_dir)


def _check_config(path: Path) -> None:
    from hpctrain.trainconfig import load_config

    if not path.exists():
        raise HpctrainError(f"--config {path} does not exist", "check the path")
    # The job would read it only after waiting in the queue: refuse a bad one now.
    load_config(path)


def _check_run_dir(run_dir: Path) -> None:
    try:
        base = next(p for p in run_dir.parents if p.exists())
        usable = base.is_dir() and os.access(base, os.W_OK | os.X_OK)
    except OSError:
        base, usable = run_dir.parent, False
    if not usable:
        raise HpctrainError(
            f"cannot create the run directory {run_dir}: {base} is not a writable directory",
            "choose a writable output_dir in the profile, or submit from another directory",
        )


def _write_files(prep: Prepared) -> None:
    prep.run_dir.mkdir(parents=True, exist_ok=False)
    for f in prep.files:
        if f.copy_of is not None:
            shutil.copy2(f.copy_of, f.path)
        else:
            f.path.write_text(f.text or "", encoding="utf-8")
        if f.mode is not None:
            f.path.chmod(f.mode)


def _create_run_dir(prep: Prepared) -> None:
    try:
        _write_files(prep)
    except FileExistsError:
        raise HpctrainError(
            f"run directory {prep.run_dir} exists already", "submit again (a new name is drawn)"
        ) from None
    except OSError as e:
        shutil.rmtree(prep.run_dir, ignore_errors=True)
        raise HpctrainError(
            f"cannot write the run directory {prep.run_dir}: {e.strerror}",
            "choose a writable output_dir in the profile, or submit from another directory",
        ) from None


def create_run_dir(prep: Prepared, site: RunSite | None = None) -> GitState | None:
    """Make the run directory with its files, here or at the login (`site`); the git state."""
    if site is not None:
        site.create(prep)
        return site.git()
    check_submission(prep)
    _create_run_dir(prep)
    return git_state(prep.workdir)


def discard_run_dir(prep: Prepared, site: RunSite | None = None) -> None:
    """Remove a run directory that nothing ran in, here or at the login."""
    if site is not None:
        site.discard(prep)
    else:
        shutil.rmtree(prep.run_dir, ignore_errors=True)


def _sbatch(prep: Prepared, client: SlurmClient, previous: str | None = None,
            site: RunSite | None = None) -> str:
    try:
        return client.submit(prep.script_path, cwd=prep.workdir,
                             options=segment_options(prep.plan, previous))
    except SlurmTimeoutError as e:
        # sbatch may have queued the job before it timed out; its logs need the directory.
        with contextlib.suppress(OSError, HpctrainError):
            (site.write if site else _write_local)(prep.run_dir / rundir.UNCONFIRMED, f"{e.what}\n")
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
        discard_run_dir(prep, site)
        raise


def _write_run_info(prep: Prepared, done: Queued, site: RunSite | None = None) -> None:
    info = {
        "job_id": done.job_id,
        "cluster": done.cluster,
        "hpctrain_version": __version__,
        "invocation": prep.plan.invocation,
        "workdir": str(prep.workdir),
        "git": dataclasses.asdict(done.git) if done.git else None,
        "plan": prep.plan.summary(),
        "stdout": done.stdout_path,
        "stderr": done.stderr_path,
    }
    # The history row holds the same facts; the job is queued either way.
    with contextlib.suppress(OSError, HpctrainError):
        (site.write if site else _write_local)(prep.run_dir / rundir.RUN_INFO,
                                               json.dumps(info, indent=2) + "\n")


def _new_job(prep: Prepared, done: Queued, head: str | None, segment: int,
             site: RunSite | None = None) -> NewJob:
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
        login=site.login if site else None, login_config=site.login_config if site else None,
    )


def _record(prep: Prepared, done: Queued, history: History, head: str | None = None,
            segment: int = 1, site: RunSite | None = None) -> JobRecord:
    try:
        return history.add(_new_job(prep, done, head, segment, site))
    except HistoryError as e:
        raise HistoryError(
            f"job {done.job_id} was submitted (run directory {prep.run_dir}) but not recorded: "
            f"{e.what}",
            f"follow it with squeue -j {done.job_id}; {e.fix}" if e.fix else None,
        ) from None


def _queued(prep: Prepared, client: SlurmClient, job_id: str, git: GitState | None,
            user: str | None = None) -> Queued:
    user = user or getpass.getuser()
    name = prep.plan.job_name
    return Queued(
        job_id=job_id, cluster=client.cluster_name() or prep.plan.cluster,
        stdout_path=expand_log_pattern(prep.logs.stdout, job_id, name, user),
        stderr_path=expand_log_pattern(prep.logs.stderr, job_id, name, user),
        git=git,
    )


def submit(prep: Prepared, client: SlurmClient, history: History, site: RunSite | None = None,
           user: str | None = None) -> Submitted:
    """Create the run directory, sbatch the script, record the job; on refusal undo it all.

    A chain (`plan.chain` > 1) queues that many jobs, each after the one before. With a
    `site` (a login) the run directory is made there and `client` runs sbatch there.
    """
    git = create_run_dir(prep, site)
    queued = _queued(prep, client, _sbatch(prep, client, site=site), git, user)
    _write_run_info(prep, queued, site)
    record = _record(prep, queued, history, site=site)
    chain = [queued.job_id]
    for segment in range(2, prep.plan.chain + 1):
        later = _queued(prep, client, _sbatch(prep, client, chain[-1], site), git, user)
        _record(prep, later, history, head=queued.job_id, segment=segment, site=site)
        chain.append(later.job_id)
    return Submitted(
        job_id=queued.job_id, cluster=queued.cluster, run_dir=prep.run_dir,
        script_path=prep.script_path, stdout_path=queued.stdout_path,
        stderr_path=queued.stderr_path, git=git, record=record, chain=tuple(chain),
    )
