"""Copy the project to the login's work directory with rsync over the login's ssh master."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from hpctrain.errors import RemoteError
from hpctrain.remote.connection import Connection
from hpctrain.snapshots.listing import existing, project_files

SYNC_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class SyncReport:
    """What was sent: how many files were offered, and how the list was chosen."""

    files: int
    source: str


def rsync_argv(conn: Connection, remote_dir: str, *, files_from: bool,
               exclude: tuple[str, ...] = ()) -> list[str]:
    """rsync over the master into `remote_dir` (created first), every value quoted."""
    # rsync splits -e on spaces and honours quotes, as a shell would.
    shell = shlex.join(conn.client_argv())
    mkdir = f"mkdir -p -- {shlex.quote(remote_dir)} && rsync"
    # --modify-window=-1: compare modification times to the nanosecond. rsync's default (whole
    # seconds) skips a file edited within the second of the last sync when its size is the
    # same, and the job would run the login's stale copy (seen: two submits 0.6 s apart).
    argv = ["rsync", "--recursive", "--links", "--perms", "--times", "--modify-window=-1",
            "--compress", "-e", shell, f"--rsync-path={mkdir}"]
    if files_from:
        argv += ["--files-from=-", "--from0"]
    else:
        # Outside git: what .gitignore files say, and never the repository metadata.
        argv += ["--filter=:- .gitignore", "--exclude=.git/"]
    argv += [f"--exclude={e}" for e in exclude]
    # The host was checked (no leading '-'); `--` keeps the paths from being options.
    return [*argv, "--", "./", f"{conn.target.host}:{remote_dir}/"]


def sync(conn: Connection, root: Path, remote_dir: str, exclude: tuple[str, ...] = ()
         ) -> SyncReport:
    """Send the project at `root` to `remote_dir`; unchanged files cost nothing."""
    if shutil.which("rsync") is None:
        raise RemoteError("rsync is not installed here", "install it (Debian: apt-get install "
                          "rsync; macOS ships one) - the login node needs it too")
    conn.require()
    names = project_files(root)
    if names is not None:
        names = existing(root, names)  # rsync fails on a tracked file deleted here
    listing = None if names is None else b"".join(n.encode("utf-8", "surrogateescape") + b"\0"
                                                   for n in names)
    argv = rsync_argv(conn, remote_dir, files_from=names is not None, exclude=exclude)
    conn.round_trips += 1
    try:
        done = subprocess.run(argv, cwd=root, input=listing, capture_output=True,
                              timeout=SYNC_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise RemoteError(f"syncing {root} took over {SYNC_TIMEOUT_S:g} s",
                          "keep data and run outputs out of the project (.gitignore)") from None
    if done.returncode != 0:
        if not conn.alive():
            raise conn.down_error("it went away while syncing")
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise RemoteError(f"rsync to {conn.target.host}:{remote_dir} failed: "
                          f"{message[-1] if message else done.returncode}",
                          "check that rsync is installed on the login node and the directory "
                          "is writable")
    return SyncReport(files=len(names) if names is not None else -1,
                      source="git ls-files" if names is not None else ".gitignore filter")
