"""Submit a rendered plan: run directory, sbatch --parsable, history row."""

from __future__ import annotations

import contextlib
import dataclasses
import getpass
import json
import os
import re
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from hpctrain import __version__
from hpctrain.errors import HistoryError, HpctrainError
from hpctrain.history import History, JobRecord, NewJob
from hpctrain.plan import JobPlan
from hpctrain.profiles import Profile
from hpctrain.slurm.client import SlurmClient, SlurmTimeoutError

SCRIPT_NAME = "job.sbatch"
PROFILE_NAME = "profile.yaml"
RUN_INFO_NAME = "run.json"
UNCONFIRMED_NAME = "SUBMIT-UNCONFIRMED"
GIT_TIMEOUT_S = 5.0

_DIR_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


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


def run_dir_for(
    output_dir: str, job_name: str, cwd: Path, now: datetime | None = None,
    token: str | None = None,
) -> Path:
    """`<output_dir>/<job-name>-<UTC timestamp>-<random>`, absolute (output_dir is cwd-relative)."""
    base = Path(output_dir).expanduser()
    if not base.is_absolute():
        base = cwd / base
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    name = _DIR_UNSAFE.sub("_", job_name).strip("._") or "job"
    return Path(os.path.abspath(base)) / f"{name}-{stamp}-{token or secrets.token_hex(3)}"


_SBATCH_PATH_LINE = re.compile(r"^#SBATCH\s+--(output|error)=(.*)$", re.MULTILINE)


def _unquote_sbatch(value: str) -> str:
    """Undo render.sbatch_quote: "..." with backslash escapes, or a bare word."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def script_log_patterns(script: str) -> tuple[str | None, str | None]:
    """The --output and --error file patterns a rendered script asks for."""
    found: dict[str, str] = {}
    for m in _SBATCH_PATH_LINE.finditer(script):
        found[m.group(1)] = _unquote_sbatch(m.group(2))
    return found.get("output"), found.get("error")


def expand_log_pattern(pattern: str, job_id: str, job_name: str, user: str) -> str:
    """Expand SLURM's file-name patterns (%j %x %u %A %%) in one pass, as sbatch does."""
    table = {"j": job_id, "A": job_id, "x": job_name, "u": user, "%": "%"}

    def sub(m: re.Match[str]) -> str:
        return table.get(m.group(1), m.group(0))

    return re.sub(r"%(.)", sub, pattern)


@dataclass(frozen=True)
class Prepared:
    """Everything submit needs, decided before anything is written (this is the dry run)."""

    plan: JobPlan
    script: str
    run_dir: Path
    profile: Profile
    config: Path | None
    workdir: Path

    @property
    def script_path(self) -> Path:
        return self.run_dir / SCRIPT_NAME

    def as_dict(self) -> dict[str, object]:
        return {
            "run_dir": str(self.run_dir),
            "script": str(self.script_path),
            "workdir": str(self.workdir),
            "plan": self.plan.summary(),
        }


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
            "follow": [f"hpctrain status {self.job_id}", f"hpctrain logs -f {self.job_id}"],
        }


def _write_run_dir(prep: Prepared) -> None:
    import yaml

    prep.run_dir.mkdir(parents=True, exist_ok=False)
    prep.script_path.write_text(prep.script, encoding="utf-8")
    prep.script_path.chmod(0o755)
    (prep.run_dir / PROFILE_NAME).write_text(
        yaml.safe_dump(dataclasses.asdict(prep.profile), sort_keys=False), encoding="utf-8"
    )
    if prep.config is not None:
        shutil.copy2(prep.config, prep.run_dir / f"config-snapshot{prep.config.suffix}")


def submit(
    prep: Prepared, client: SlurmClient, history: History
) -> Submitted:
    """Create the run directory, sbatch the script, record the job; on refusal undo it all."""
    if prep.config is not None and not prep.config.is_file():
        raise HpctrainError(f"--config {prep.config} does not exist", "check the path")
    try:
        _write_run_dir(prep)
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
    git = git_state(prep.workdir)
    try:
        job_id = client.submit(prep.script_path, cwd=prep.workdir)
    except SlurmTimeoutError as e:
        # sbatch may have queued the job before it timed out; its logs need the directory.
        with contextlib.suppress(OSError):
            (prep.run_dir / UNCONFIRMED_NAME).write_text(f"{e.what}\n")
        raise SlurmTimeoutError(
            f"{e.what} (run directory {prep.run_dir} kept, marked {UNCONFIRMED_NAME})", e.fix
        ) from None
    except HpctrainError:
        # Nothing was queued: leave no run directory behind that looks like a run.
        shutil.rmtree(prep.run_dir, ignore_errors=True)
        raise
    cluster = client.cluster_name() or prep.plan.cluster
    out_pat, err_pat = script_log_patterns(prep.script)
    user = getpass.getuser()
    stdout = expand_log_pattern(out_pat, job_id, prep.plan.job_name, user) if out_pat else None
    stderr = expand_log_pattern(err_pat, job_id, prep.plan.job_name, user) if err_pat else None
    info = {
        "job_id": job_id,
        "cluster": cluster,
        "hpctrain_version": __version__,
        "invocation": prep.plan.invocation,
        "workdir": str(prep.workdir),
        "git": dataclasses.asdict(git) if git else None,
        "plan": prep.plan.summary(),
        "stdout": stdout,
        "stderr": stderr,
    }
    # The history row below holds the same facts; the job is queued either way.
    with contextlib.suppress(OSError):
        (prep.run_dir / RUN_INFO_NAME).write_text(json.dumps(info, indent=2) + "\n")
    new = NewJob(
        job_id=job_id,
        cluster=cluster,
        profile=prep.plan.profile,
        job_name=prep.plan.job_name,
        partition=prep.plan.partition,
        nodes=prep.plan.nodes,
        gpus_per_node=prep.plan.gpus_per_node,
        total_gpus=prep.plan.total_gpus,
        command=list(prep.plan.command),
        run_dir=str(prep.run_dir),
        script_path=str(prep.script_path),
        stdout_path=stdout,
        stderr_path=stderr,
        workdir=str(prep.workdir),
        git_commit=git.commit if git else None,
        git_dirty=git.dirty if git else None,
        time_limit_s=prep.plan.time_seconds,
    )
    try:
        record = history.add(new)
    except HistoryError as e:
        raise HistoryError(
            f"job {job_id} was submitted (run directory {prep.run_dir}) but not recorded: "
            f"{e.what}",
            f"follow it with squeue -j {job_id}; {e.fix}" if e.fix else None,
        ) from None
    return Submitted(
        job_id=job_id, cluster=cluster, run_dir=prep.run_dir, script_path=prep.script_path,
        stdout_path=stdout, stderr_path=stderr, git=git, record=record,
    )
