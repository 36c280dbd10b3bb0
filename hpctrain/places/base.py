"""What every place offers: SLURM, the project, the run directory's files, the git state."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from hpctrain.plan import JobRequest
    from hpctrain.remote.sync import SyncReport
    from hpctrain.slurm.client import SlurmClient
    from hpctrain.snapshots.gc import Collected
    from hpctrain.snapshots.model import Snapshot
    from hpctrain.snapshots.spec import CodeSpec
    from hpctrain.values.rundir import RunFile

GIT_TIMEOUT_S = 5.0

# A file to read at a place: its path, and its last lines only (None: whole).
FileRead = tuple[Path, int | None]

# In a runs folder a submit made: `*`, so that a `git add .` in the project takes no run along
# (logs, checkpoints, code snapshots). Git's file, not a run directory's (hpctrain.values.rundir).
RUNS_GITIGNORE = ".gitignore"


class LogFollower(Protocol):
    """Reads what a growing file gained since the last read, and waits for it to grow."""

    # How long to wait between reads where nothing wakes the reader.
    poll_s: float

    def read_new(self) -> bytes:
        """The bytes appended since the last call (b"" when none, or no file yet)."""
        ...

    def wait(self, timeout_s: float) -> None:
        """Until the file may have grown, or `timeout_s` has passed."""
        ...

    def writer_closed(self) -> bool:
        """True when the file's last writer has closed it (the job has most likely ended);
        False where that cannot be seen (another node's writes over NFS, a login)."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class GitState:
    """The commit a project was at and whether its tracked files differed from it."""

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


def git_diff(cwd: Path) -> str | None:
    """The work tree's changes to tracked files against HEAD (None: none, or no git here)."""
    try:
        done = subprocess.run(["git", "-C", str(cwd), "diff", "HEAD", "--binary", "--", "."],
                              capture_output=True, timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout.decode("utf-8", "replace")
    return text if done.returncode == 0 and text else None


class Facts(Protocol):
    """What the place is, and what differs between places, as facts the others ask."""

    @property
    def login(self) -> str | None:
        """The login's destination for the history row (None: this machine)."""
        ...

    @property
    def login_config(self) -> str | None: ...

    @property
    def user(self) -> str:
        """Who SLURM runs the jobs as (%u in log file patterns)."""
        ...

    @property
    def uids_known_here(self) -> bool:
        """SLURM's uids are this machine's users: `why` names who cancelled from its pwd."""
        ...

    @property
    def free_reads(self) -> bool:
        """Reading a file costs no round trip: `status` reads a new verdict's logs only then."""
        ...

    @property
    def run_dirs_on_this_disk(self) -> bool:
        """The run directories are this machine's paths: reports and plots are written there."""
        ...

    @property
    def where(self) -> str:
        """The place in words for a message: "here", or "on HOST"."""
        ...

    def shown(self, path: Path | str) -> str:
        """A path at the place as people are shown it (a login's: host:path)."""
        ...

    def shown_cluster(self, cluster: str) -> str:
        """A cluster as a listing names it (through a login: "c via HOST")."""
        ...


class Slurm(Protocol):
    """The place's SLURM: one client, and the cluster it talks to."""

    def slurm_client(self) -> SlurmClient:
        """The one SLURM client, its commands run at the place."""
        ...

    def cluster(self, client: SlurmClient, recorded: str) -> str:
        """The cluster `client` talks to; `recorded` is the history's, for a login that does
        not say."""
        ...


class RunFiles(Protocol):
    """The run directory's files at the place: made whole, written, read and followed."""

    def check_files(self, run_dir: Path, files: Sequence[RunFile]) -> None:
        """Every check made before writing: --config files load, the run directory can be made."""
        ...

    def paths_missing(self, paths: Sequence[str]) -> list[str]:
        """Those of `paths` (absolute; a leading ~/ is the home there) that do not exist at the
        place, as given: what a job would read there as it starts (a container image)."""
        ...

    def create_run_dir(self, run_dir: Path, files: Sequence[RunFile]) -> None:
        """Make the run directory with its files, whole; HpctrainError if it exists."""
        ...

    def write(self, path: Path, text: str) -> None:
        """Replace one small file whole or not at all (run.json, a race's job ids)."""
        ...

    def discard(self, run_dir: Path) -> None:
        """Remove a run directory that nothing ran in."""
        ...

    def read_file(self, path: Path, tail: int | None) -> tuple[bytes, int] | None:
        """A file (or its last `tail` lines) and its size; None if it does not exist."""
        ...

    def follower(self, path: Path, offset: int) -> LogFollower:
        """What `logs -f` reads a growing file through, from byte `offset` on."""
        ...

    def readable(self, run_dir: Path, names: Sequence[str]) -> AbstractContextManager[Path]:
        """For a `with` block, a directory on this disk holding the run directory's `names`
        (files or folders in it) as they are now: here, the run directory itself; over a
        login, a copy made in one round trip. What is not there yet is missing in it too."""
        ...


class CodeStore(Protocol):
    """Code snapshots at the place (docs/jobs.md, "Code snapshots")."""

    def check_code(self, spec: CodeSpec) -> CodeSpec:
        """Refuse (a dry run too) a project that cannot be snapshotted: too large, a bad path;
        the spec with its files listed, for the freeze of the same submit."""
        ...

    def freeze_code(self, spec: CodeSpec) -> Snapshot:
        """Snapshot the project at the place and make the job's working directory from it."""
        ...

    def link_code(self, spec: CodeSpec, snapshot_id: str) -> Snapshot:
        """The job's working directory from a snapshot the place's store holds (a rerun)."""
        ...

    def collect_code(self, store: Path, keep: set[str], grace_s: float, dry_run: bool
                     ) -> Collected | None:
        """`hpctrain gc` of one store at the place (None: there is no such store)."""
        ...


class Project(Protocol):
    """The project at the place: where it is, how a request fits there, bringing it there."""

    @property
    def workdir(self) -> Path:
        """Where the project is at the place (jobs start there)."""
        ...

    def adapt(self, req: JobRequest) -> JobRequest:
        """The request with the place's facts (its Python environment, its home for `~`)."""
        ...

    def check(self) -> None:
        """Fail fast (a login's master is down) before anything is planned against it."""
        ...

    def ask_ahead(self, req: JobRequest, acting: bool) -> None:
        """Start the questions a submission of `req` will ask here (hpctrain/startup/ahead.py), so
        that they run while it is planned; `acting`: not a dry run."""
        ...

    def sync_project(self, output_dir: str) -> SyncReport | None:
        """Bring the project to the place (None: it is there already)."""
        ...

    def sync_facts(self, synced: SyncReport | None) -> dict[str, object]:
        """What the sync did, for submit's JSON ({} where nothing was synced)."""
        ...

    def sync_notes(self, synced: SyncReport | None) -> tuple[str, ...]:
        """What the sync did, for people (nothing where nothing was synced)."""
        ...

    def git(self) -> GitState | None:
        """The commit and dirty flag of the project submitted from here."""
        ...

    def git_diff(self) -> str | None:
        """The project's changes against its commit (`git diff HEAD`), None without any."""
        ...


class Terminal(Protocol):
    """Commands run where SLURM's commands run: with this terminal, or as a byte stream."""

    def run_attached(self, argv: tuple[str, ...]) -> int:
        """Run `argv` there with this terminal attached (over a login: `ssh -t`); its status."""
        ...

    def reach(self, argv: tuple[str, ...]) -> tuple[str, ...]:
        """The command line that runs `argv` there from this machine, its stdin and stdout
        passed through (an ssh ProxyCommand's)."""
        ...


class Place(Facts, Slurm, RunFiles, CodeStore, Project, Terminal, Protocol):
    """Where a submission goes: this machine, or a login over its ssh master. Each group is
    one concern; a place implements each group as one class (places/local.py, login.py)."""

    def ask_and_read(self, asks: Sequence[tuple[str, ...]], reads: Sequence[FileRead]
                     ) -> tuple[list[tuple[str, str, int]], list[tuple[bytes, int] | None]]:
        """SLURM commands' (stdout, stderr, exit code) and files as `read_file` gives them,
        asked together (over a login: one round trip)."""
        ...
