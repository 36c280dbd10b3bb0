"""This machine as a place: SLURM's commands here, the run directory on the local disk."""

from __future__ import annotations

import getpass
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from hpctrain.errors import HpctrainError
from hpctrain.files.atomic import tail_bytes, write_atomic
from hpctrain.places.base import RUNS_GITIGNORE, FileRead, GitState, git_diff, git_state
from hpctrain.places.filewait import waiter_for
from hpctrain.startup import ahead
from hpctrain.values.rundir import runs_folder

if TYPE_CHECKING:
    from hpctrain.plan import JobRequest
    from hpctrain.remote.sync import SyncReport
    from hpctrain.slurm.client import SlurmClient
    from hpctrain.snapshots.gc import Collected
    from hpctrain.snapshots.model import Snapshot
    from hpctrain.snapshots.spec import CodeSpec
    from hpctrain.values.rundir import RunFile

# Between reads of a followed file where no inotify event wakes the reader.
FILE_POLL_S = 0.25


@dataclass
class FileFollower:
    """Reads only the bytes appended since the last read; copes with a missing or truncated file."""

    path: Path
    offset: int = 0

    def read_new(self) -> bytes:
        """The bytes appended since the last call (b"" when none, or no file yet)."""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                if size < self.offset:
                    # Truncated or replaced (a requeued job starts its log afresh).
                    self.offset = 0
                if size == self.offset:
                    return b""
                fh.seek(self.offset)
                data = fh.read(size - self.offset)
        except FileNotFoundError:
            return b""
        self.offset += len(data)
        return data


class LocalFollower(FileFollower):
    """A file on this disk, woken by the kernel's inotify where the file system has it."""

    poll_s = FILE_POLL_S

    def __init__(self, path: Path, offset: int = 0) -> None:
        super().__init__(path, offset)
        self._waiter = waiter_for(path)

    def wait(self, timeout_s: float) -> None:
        self._waiter.wait(timeout_s)

    def writer_closed(self) -> bool:
        return self._waiter.writer_closed()

    def close(self) -> None:
        self._waiter.close()


class LocalSlurm:
    """SLURM's commands run on this machine."""

    connect: Callable[[], SlurmClient]

    @cached_property
    def _client(self) -> SlurmClient:
        return self.connect()

    def slurm_client(self) -> SlurmClient:
        return self._client

    def cluster(self, client: SlurmClient, recorded: str) -> str:
        # Here an unknown cluster is an error to show, never the one a job was recorded on.
        return client.cluster_name() or ""

    def run_attached(self, argv: tuple[str, ...]) -> int:
        from hpctrain.slurm.interactive import run_attached

        return run_attached(argv)

    def reach(self, argv: tuple[str, ...]) -> tuple[str, ...]:
        from hpctrain.slurm.interactive import with_conf

        return with_conf(argv)


class LocalFiles:
    """The run directory on this machine's disk."""

    # The folders above each run directory that creating it made (e.g. hpctrain-runs/), so
    # that a submit that fails leaves none of them behind.
    _made: dict[Path, list[Path]]

    def check_files(self, run_dir: Path, files: Sequence[RunFile]) -> None:
        check_copies(f.copy_of for f in files if f.copy_of is not None)
        _check_run_dir(run_dir)

    def paths_missing(self, paths: Sequence[str]) -> list[str]:
        # ~/ as the job's shell reads it (render's sh_path): $HOME, never another user's ~name.
        return [p for p in paths
                if not os.path.exists(Path.home() / p[2:] if p.startswith("~/") else p)]

    def create_run_dir(self, run_dir: Path, files: Sequence[RunFile]) -> None:
        self._made[run_dir] = [p for p in run_dir.parents if not p.exists()]
        try:
            _write_files(run_dir, files)
            if run_dir.parent in self._made[run_dir]:
                # The runs folder is new (hpctrain-runs/ in a git project, typically): git is
                # told to leave it out. A folder that existed is the user's to decide.
                (run_dir.parent / RUNS_GITIGNORE).write_text("*\n", encoding="utf-8")
        except FileExistsError:
            raise HpctrainError(
                f"run directory {run_dir} exists already", "submit again (a new name is drawn)"
            ) from None
        except OSError as e:
            self.discard(run_dir)
            raise HpctrainError(
                f"cannot write the run directory {run_dir}: {e.strerror}",
                "choose a writable output_dir in the profile, or submit from another directory",
            ) from None

    def write(self, path: Path, text: str) -> None:
        write_atomic(path, text)

    def discard(self, run_dir: Path) -> None:
        from hpctrain.snapshots.spec import STORE_DIR

        shutil.rmtree(run_dir, ignore_errors=True)
        made = self._made.pop(run_dir, [])
        runs = run_dir.parent
        if runs in made and {p.name for p in runs.iterdir()} <= {STORE_DIR, RUNS_GITIGNORE}:
            # This submit made the runs folder, so the code snapshot frozen there is its alone.
            shutil.rmtree(runs / STORE_DIR, ignore_errors=True)
            (runs / RUNS_GITIGNORE).unlink(missing_ok=True)
        for parent in made:
            try:
                # Only while empty: another submit may have put its run beside this one.
                parent.rmdir()
            except OSError:
                return

    def read_file(self, path: Path, tail: int | None) -> tuple[bytes, int] | None:
        try:
            if tail is not None:
                return tail_bytes(path, tail)
            data = path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return None
        return data, len(data)

    def follower(self, path: Path, offset: int) -> LocalFollower:
        return LocalFollower(path, offset)

    def readable(self, run_dir: Path, names: Sequence[str]) -> AbstractContextManager[Path]:
        return nullcontext(run_dir)


class LocalCode:
    """Code snapshots frozen by this process, in stores on this disk."""

    def check_code(self, spec: CodeSpec) -> CodeSpec:
        from hpctrain.snapshots.spec import check_here

        return check_here(spec, spec.project)

    def freeze_code(self, spec: CodeSpec) -> Snapshot:
        from hpctrain.snapshots.spec import freeze_here

        return freeze_here(spec)

    def link_code(self, spec: CodeSpec, snapshot_id: str) -> Snapshot:
        from hpctrain.snapshots.spec import link_here

        return link_here(spec, snapshot_id)

    def collect_code(self, store: Path, keep: set[str], grace_s: float, dry_run: bool
                     ) -> Collected | None:
        from hpctrain.snapshots.gc import collect

        if not (store / "manifests").is_dir():
            return None
        return collect(store, keep, dry_run=dry_run, grace_s=grace_s)


class LocalProject:
    """The project is the directory hpctrain runs in: nothing to bring anywhere."""

    workdir: Path

    def adapt(self, req: JobRequest) -> JobRequest:
        return req

    def check(self) -> None:
        """Nothing to reach: SLURM's own errors say what is missing here."""

    def sync_project(self, output_dir: str) -> SyncReport | None:
        return None

    def sync_facts(self, synced: SyncReport | None) -> dict[str, object]:
        return {}

    def sync_notes(self, synced: SyncReport | None) -> tuple[str, ...]:
        return ()

    def git(self) -> GitState | None:
        workdir = self.workdir
        return ahead.answer(("git state", workdir), lambda: git_state(workdir))

    def git_diff(self) -> str | None:
        return git_diff(self.workdir)


def _from_environment() -> SlurmClient:
    # Imported when a client is made: `status` with nothing to refresh makes none.
    from hpctrain.slurm.client import SlurmClient

    return SlurmClient.from_environment()


@dataclass
class LocalPlace(LocalSlurm, LocalFiles, LocalCode, LocalProject):
    """Submit from where hpctrain runs: the project is the current directory."""

    # How the client is made (the CLI's backends hand theirs in, so that tests can too).
    connect: Callable[[], SlurmClient] = _from_environment
    workdir: Path = field(default_factory=Path.cwd)
    _made: dict[Path, list[Path]] = field(default_factory=dict, init=False, repr=False)

    login = None
    login_config = None
    uids_known_here = True
    free_reads = True
    run_dirs_on_this_disk = True
    where = "here"

    @property
    def user(self) -> str:
        return getpass.getuser()

    def shown_cluster(self, cluster: str) -> str:
        return cluster

    def shown(self, path: Path | str) -> str:
        return str(path)

    def ask_ahead(self, req: JobRequest, acting: bool) -> None:
        from hpctrain.snapshots.spec import view_ahead

        self.slurm_client().reservations_ahead()
        if req.snapshot:
            view_ahead(self.workdir, runs_folder(req.profile.output_dir, self.workdir),
                       req.in_place)
        if acting:
            workdir = self.workdir
            ahead.start(("git state", workdir), lambda: git_state(workdir))

    def ask_and_read(self, asks: Sequence[tuple[str, ...]], reads: Sequence[FileRead]
                     ) -> tuple[list[tuple[str, str, int]], list[tuple[bytes, int] | None]]:
        client = self.slurm_client()
        answers = [client.transport.execute(a, None, client.timeout_s, None) for a in asks]
        return answers, [self.read_file(path, tail) for path, tail in reads]


def check_copies(paths: Iterable[Path]) -> None:
    """The files the run directory keeps copies of (a --config) are still there.

    Their settings were read when the request was built and are in the script; only the copy
    is left to make, and a file gone since must not leave half a run directory.
    """
    for path in paths:
        if not path.is_file():
            raise HpctrainError(f"--config {path} does not exist", "check the path")


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


def _write_files(run_dir: Path, files: Sequence[RunFile]) -> None:
    run_dir.mkdir(parents=True, exist_ok=False)
    for f in files:
        # A sweep's points have their files in folders below the run directory.
        f.path.parent.mkdir(parents=True, exist_ok=True)
        if f.copy_of is not None:
            shutil.copy2(f.copy_of, f.path)
        elif f.mode is not None:
            # Made with its mode: a private file (the dev sshd's host key) is never readable
            # by others, not even between its writing and a chmod.
            fd = os.open(f.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, f.mode & 0o700)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(f.text or "")
        else:
            f.path.write_text(f.text or "", encoding="utf-8")
        if f.mode is not None:
            f.path.chmod(f.mode)
