"""A login node as a place: SLURM over the ssh master, the project synced to its workdir.

Also which login a profile or a recorded job goes through (its connection), and what
`hpctrain login` opens, checks and closes.
"""

from __future__ import annotations

import dataclasses
import io
import json
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Protocol

from hpctrain.errors import RemoteError
from hpctrain.places.base import RUNS_GITIGNORE, FileRead, GitState, git_diff, git_state
from hpctrain.places.local import check_copies
from hpctrain.remote.connection import Connection, Target, shell_command

if TYPE_CHECKING:
    from hpctrain.history import JobRecord
    from hpctrain.plan import JobRequest
    from hpctrain.profiles.model import Login, Profile
    from hpctrain.remote import sync as syncing
    from hpctrain.slurm.client import SlurmClient
    from hpctrain.slurm.transport import ControllerDownError
    from hpctrain.snapshots.spec import CodeSpec
    from hpctrain.snapshots.store import Collected, Snapshot
    from hpctrain.values.rundir import RunFile

# Reading a remote log costs a round trip (over the master, no new connection): not as
# often as a local file.
REMOTE_FILE_POLL_S = 1.0


def python_env(choice: str | None, login_python: str | None) -> str | None:
    """The remote environment jobs activate: --python-env, else login.python; 'none': none."""
    if choice == "none":
        return None
    return choice or login_python


class _Login(Protocol):
    """What each group of LoginPlace uses of the others."""

    conn: Connection
    section: Login | None
    python_choice: str | None
    local_root: Path

    @property
    def workdir(self) -> Path: ...

    def local_copy(self, remote: Path) -> Path: ...

    def check_code(self, spec: CodeSpec) -> CodeSpec: ...


class SshTransport:
    """Runs SLURM commands on the login node over the master (SlurmClient.transport)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    @property
    def batches(self) -> bool:
        # Every command is a round trip over the master: squeue and sacct share one.
        return True

    def conf_path(self) -> str | None:
        # The login's slurm.conf is not readable from here.
        return None

    def controller_down(self, command: str) -> ControllerDownError | None:
        # The controller's port is reachable from the login node, not from here.
        return None

    def execute(self, argv: tuple[str, ...], input: str | None, limit: float,
                cwd: str | Path | None) -> tuple[str, str, int]:
        data = input.encode() if input is not None else None
        out, err, code = self.conn.run(shell_command(argv, str(cwd) if cwd else None),
                                       input=data, timeout_s=limit)
        return out.decode(errors="replace"), err.decode(errors="replace"), code

    def execute_many(self, argvs: Sequence[tuple[str, ...]], limit: float
                     ) -> list[tuple[str, str, int]]:
        return self.conn.run_many([shell_command(a) for a in argvs], timeout_s=limit)

    def cluster_name(self) -> str | None:
        return self.conn.facts()["cluster"] or None

    def slurm_version_text(self) -> str | None:
        return self.conn.facts().get("slurm") or None


class LoginSlurm:
    """SLURM's commands run on the login, over its master."""

    conn: Connection

    @cached_property
    def _client(self) -> SlurmClient:
        from hpctrain.slurm.client import SlurmClient

        # The timeout as configured here (HPCTRAIN_SLURM_TIMEOUT); no local slurm.conf applies.
        return SlurmClient.over(SshTransport(self.conn))

    def slurm_client(self) -> SlurmClient:
        return self._client

    def cluster(self, client: SlurmClient, recorded: str) -> str:
        # A login whose SLURM does not name its cluster is still the one the jobs went to.
        return client.cluster_name() or recorded


def _read_command(path: Path, tail: int | None) -> str:
    """The shell command whose answer `_read_answer` reads: the size, then the file or its end."""
    quoted = shlex.quote(str(path))
    body = f"tail -n {int(tail)} {quoted}" if tail is not None else f"cat {quoted}"
    return f"[ -f {quoted} ] || exit 3; wc -c < {quoted}; {body}"


def _read_answer(out: bytes, code: int) -> tuple[bytes, int] | None:
    if code != 0:
        return None
    size_line, _, data = out.partition(b"\n")
    return data, int(size_line.strip() or 0)


@dataclass
class RemoteFollower:
    """Reads what a remote file gained since the last read (FileFollower's twin)."""

    conn: Connection
    path: Path
    offset: int = 0
    poll_s: float = REMOTE_FILE_POLL_S

    def read_new(self) -> bytes:
        """The bytes appended since the last call (b"" when none, or no file yet)."""
        quoted = shlex.quote(str(self.path))
        out, _err, code = self.conn.run(
            f'[ -f {quoted} ] || exit 3; wc -c < {quoted}; tail -c +{self.offset + 1} {quoted}')
        if code != 0:
            return b""
        size_line, _, data = out.partition(b"\n")
        if int(size_line.strip() or 0) < self.offset:
            # Truncated or replaced (a requeued job starts its log afresh).
            self.offset = 0
            return self.read_new()
        self.offset += len(data)
        return data

    def wait(self, timeout_s: float) -> None:
        # Nothing here hears the login's writes: the next read, a round trip, finds them.
        time.sleep(max(0.0, timeout_s))

    def writer_closed(self) -> bool:
        # Nothing here hears the node close the file either: the job's end is SLURM's answer.
        return False

    def close(self) -> None:
        pass


class LoginFiles:
    """The run directory on the login's disk, each change or read one round trip."""

    def check_files(self: _Login, run_dir: Path, files: Sequence[RunFile]) -> None:
        # The copies are made from the laptop's files (the run directory is made over there).
        check_copies(self.local_copy(f.copy_of) for f in files if f.copy_of is not None)

    def create_run_dir(self: _Login, run_dir: Path, files: Sequence[RunFile]) -> None:
        """Upload the run directory's files (one round trip); fail if it exists there."""
        import tarfile

        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for f in files:
                data = (self.local_copy(f.copy_of).read_bytes() if f.copy_of is not None
                        else (f.text or "").encode())
                # A sweep's points have their files in folders below the run directory.
                info = tarfile.TarInfo(str(f.path.relative_to(run_dir)))
                info.size, info.mode = len(data), f.mode or 0o644
                tar.addfile(info, io.BytesIO(data))
        quoted, runs = shlex.quote(str(run_dir)), shlex.quote(str(run_dir.parent))
        ignore = shlex.quote(str(run_dir.parent / RUNS_GITIGNORE))
        # A runs folder made now is left out of git there too (LocalFiles.create_run_dir).
        command = (f"{{ [ -d {runs} ] || {{ mkdir -p -- {runs} && printf '*\\n' > {ignore}; }}; }}"
                   f" && mkdir -- {quoted} && tar -xf - -C {quoted}")
        _out, err, code = self.conn.run(command, input=buf.getvalue())
        if code != 0:
            raise RemoteError(
                f"cannot create the run directory {run_dir} on {self.conn.target.host}: "
                f"{err.decode(errors='replace').strip()}",
                "choose a writable login.workdir or output_dir in the profile")

    def write(self: _Login, path: Path, text: str) -> None:
        target, partial = shlex.quote(str(path)), shlex.quote(f"{path}.partial")
        _out, err, code = self.conn.run(f"cat > {partial} && mv -f -- {partial} {target}",
                                        input=text.encode())
        if code != 0:
            raise RemoteError(f"cannot write {path} on {self.conn.target.host}: "
                              f"{err.decode(errors='replace').strip()}",
                              "check that the run directory is writable there")

    def discard(self: _Login, run_dir: Path) -> None:
        self.conn.run(f"rm -rf -- {shlex.quote(str(run_dir))}")

    def read_file(self: _Login, path: Path, tail: int | None) -> tuple[bytes, int] | None:
        out, _err, code = self.conn.run(_read_command(path, tail))
        return _read_answer(out, code)

    def follower(self: _Login, path: Path, offset: int) -> RemoteFollower:
        return RemoteFollower(self.conn, path, offset)


class LoginCode:
    """Code snapshots made on the login by its python3 running snapshots/store.py."""

    def check_code(self: _Login, spec: CodeSpec) -> CodeSpec:
        from hpctrain.snapshots.spec import check_here

        # The files are the laptop's; in-place data may exist on the login only.
        return check_here(spec, self.local_root, in_place_here=False)

    def freeze_code(self: _Login, spec: CodeSpec) -> Snapshot:
        """Freeze the synced copy on the login (one round trip): exactly the files the laptop
        listed, so that a file deleted here but left over there is not in the snapshot."""
        listed = spec.listing or self.check_code(spec).listing
        assert listed is not None
        names = b"".join(e.path.encode("utf-8", "surrogateescape") + b"\0"
                         for e in listed.entries)
        return _store_script(self.conn, "freeze", spec, names)

    def link_code(self: _Login, spec: CodeSpec, snapshot_id: str) -> Snapshot:
        return _store_script(self.conn, "link", spec, b"", "--snapshot", snapshot_id)

    def collect_code(self: _Login, store: Path, keep: set[str], grace_s: float, dry_run: bool
                     ) -> Collected | None:
        from hpctrain.snapshots.store import Collected

        args = ["collect", str(store), *(a for i in sorted(keep) for a in ("--keep", i)),
                "--grace", str(grace_s), *(["--dry-run"] if dry_run else [])]
        data = _script(self.conn, args, b"")
        if not isinstance(data, list):
            raise RemoteError(
                f"unexpected answer from the snapshot script on {self.conn.target.host}",
                "run with --debug and report it")
        return (Collected(**{**data[0], "snapshots": tuple(data[0]["snapshots"])})
                if data else None)


def _store_script(conn: Connection, action: str, spec: CodeSpec, stdin: bytes, *extra: str
                  ) -> Snapshot:
    from hpctrain.snapshots.spec import snapshot_from_json

    args = [action, str(spec.project), str(spec.store), str(spec.code_dir), *extra]
    args += [a for p in spec.keep_out for a in ("--keep-out", p)]
    args += [a for p in spec.in_place for a in ("--in-place", p)]
    data = _script(conn, args, stdin)
    if not isinstance(data, dict):
        raise RemoteError(f"unexpected answer from the snapshot script on {conn.target.host}",
                          "run with --debug and report it")
    return snapshot_from_json(data)


def _script(conn: Connection, args: list[str], stdin: bytes) -> object:
    """snapshots/store.py run by the login's python3 (one round trip); its JSON answer."""
    from hpctrain.snapshots.spec import script_source

    argv = ["python3", "-c", script_source(), *args]
    out, err, code = conn.run(shlex.join(argv), input=stdin)
    try:
        data = json.loads(out.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RemoteError(
            f"cannot run the snapshot script on {conn.target.host} (exit {code}): "
            f"{err.decode(errors='replace').strip()[-300:]}",
            "check that python3 (3.8 or later) is on the login's PATH, or submit with "
            "--no-snapshot") from None
    if isinstance(data, dict) and "error" in data:
        raise RemoteError(f"on {conn.target.host}: {data['error']}", data.get("fix"))
    return data


class LoginProject:
    """The laptop's project mirrored at the login's workdir by rsync."""

    def ask_ahead(self: _Login, req: JobRequest, acting: bool) -> None:
        """Nothing ahead: a login's questions share its one connection, one at a time."""

    @cached_property
    def workdir(self: _Login) -> Path:
        """login.workdir, else ~/hpctrain-projects/<local dir name> (asked once: a round trip)."""
        section, local = self.section, self.local_root
        chosen = (section.workdir if section and section.workdir
                  else f"~/hpctrain-projects/{local.name}")
        return Path(PurePosixPath(self.conn.absolute(chosen)))

    def local_copy(self: _Login, remote: Path) -> Path:
        """The laptop file a remote path under the workdir mirrors."""
        try:
            return self.local_root / PurePosixPath(remote).relative_to(self.workdir)
        except ValueError:
            return remote

    def adapt(self: _Login, req: JobRequest) -> JobRequest:
        output_dir = req.profile.output_dir
        if output_dir.startswith("~"):
            output_dir = self.conn.absolute(output_dir)
        profile = dataclasses.replace(req.profile, output_dir=output_dir)
        remote_python = python_env(self.python_choice, self.section.python if self.section
                                   else None)
        return dataclasses.replace(req, profile=profile, python_env=remote_python)

    def check(self: _Login) -> None:
        self.conn.require()

    def sync_project(self: _Login, output_dir: str) -> syncing.SyncReport:
        # Imported here: the sync (and the snapshot store it reads) is a submit's, not status's.
        from hpctrain.remote import sync as syncing

        return syncing.sync(self.conn, self.local_root, str(self.workdir), _excluded(output_dir))

    def sync_facts(self: _Login, synced: syncing.SyncReport | None) -> dict[str, object]:
        return {"login": self.conn.target.host, "synced_files": synced.files if synced else 0,
                "ssh_round_trips": self.conn.round_trips}

    def sync_notes(self: _Login, synced: syncing.SyncReport | None) -> tuple[str, ...]:
        return (f"synced {synced.files if synced else 0} file(s) "
                f"({synced.source if synced else 'nothing'}) to "
                f"{self.conn.target.host}:{self.workdir}",)

    def git(self: _Login) -> GitState | None:
        # The laptop's repository: the login holds a synced copy without .git history.
        return git_state(self.local_root)

    def git_diff(self: _Login) -> str | None:
        return git_diff(self.local_root)


@dataclass
class LoginPlace(LoginSlurm, LoginFiles, LoginCode, LoginProject):
    """Submit from a laptop through a login: the laptop's project is mirrored at `workdir`."""

    conn: Connection
    # The profile's login section (its workdir and python), if the login came from a profile.
    section: Login | None = None
    # --python-env as given (None: the login section's; 'none': no environment).
    python_choice: str | None = None
    local_root: Path = field(default_factory=Path.cwd)

    # Other users' uids on the cluster are not this machine's.
    uids_known_here = False
    free_reads = False
    run_dirs_on_this_disk = False

    @classmethod
    def for_profile(cls, profile: Profile, login: str | None, python_choice: str | None
                    ) -> LoginPlace | None:
        """The profile's login (its host replaced by --login DEST); None for a local profile."""
        conn = profile_connection(profile, login)
        return None if conn is None else cls(conn, profile.login, python_choice)

    @classmethod
    def for_record(cls, record: JobRecord, login: str | None) -> LoginPlace | None:
        """The login a job was submitted through (`login`: another destination for it)."""
        conn = record_connection(record, login)
        return None if conn is None else cls(conn)

    @property
    def login(self) -> str:
        return self.conn.target.host

    @property
    def login_config(self) -> str | None:
        return self.conn.target.ssh_config

    @property
    def user(self) -> str:
        return self.conn.facts()["user"]

    @property
    def where(self) -> str:
        return f"on {self.login}"

    def shown(self, path: Path | str) -> str:
        return f"{self.login}:{path}"

    def shown_cluster(self, cluster: str) -> str:
        return f"{cluster} via {self.login}"

    def ask_and_read(self, asks: Sequence[tuple[str, ...]], reads: Sequence[FileRead]
                     ) -> tuple[list[tuple[str, str, int]], list[tuple[bytes, int] | None]]:
        """One round trip: the SLURM commands, then each file's size and text."""
        commands = [shell_command(a) for a in asks] + [_read_command(p, t) for p, t in reads]
        answers = self.conn.run_many(commands, timeout_s=self.slurm_client().timeout_s)
        files = [_read_answer(out.encode(), code)
                 for out, _err, code in answers[len(asks):]]
        return answers[:len(asks)], files


def _excluded(output_dir: str) -> tuple[str, ...]:
    # Run outputs of earlier local runs inside the project are not sent again.
    rel = output_dir.strip("/")
    return () if output_dir.startswith(("/", "~")) or not rel else (f"/{rel}/",)


# --- which login: a profile's, a recorded job's, `hpctrain login NAME`'s ----------------------

def connection(target: Target, name: str | None = None) -> Connection:
    """The connection to `target`; `name` is what `hpctrain login` must be given to open it."""
    if name is None:
        name = target.host
        if target.ssh_config:
            name += f" --ssh-config {shlex.quote(target.ssh_config)}"
    return Connection(target, name)


def profile_connection(profile: Profile, override: str | None) -> Connection | None:
    """The profile's login (its host replaced by --login DEST); None for a local profile."""
    login = profile.login
    if override is None and login is None:
        return None
    config = login.ssh_config if login else None
    if override is not None and override != (login.host if login else None):
        return connection(Target.of(override, config))
    assert login is not None
    return connection(Target.of(login.host, config), profile.name)


def for_name(name: str, ssh_config: str | None = None) -> Connection:
    """`hpctrain login NAME`: a profile with a login section, else an ssh destination."""
    from hpctrain.errors import ProfileError
    from hpctrain.profiles import load_profile

    if ssh_config is None and not name.startswith("-"):
        try:
            profile = load_profile(name)
        except ProfileError:
            profile = None
        if profile is not None and profile.login is not None:
            return profile_connection(profile, None) or connection(Target.of(name))
    return connection(Target.of(name, ssh_config))


def login_state(conn: Connection, close: bool) -> dict[str, object]:
    """Whether the login's master is open (`close`: after closing it, and whether it was)."""
    was_open = conn.close() if close else conn.alive()
    return {"login": conn.target.host, "socket": str(conn.socket),
            "open": was_open and not close, "closed": close and was_open}


def open_login(conn: Connection, persist: str) -> dict[str, object]:
    """Open the login's master (or reuse it); what it is and what the remote side says."""
    opened = conn.open(persist)
    facts = conn.facts()
    return {"login": conn.target.host, "socket": str(conn.socket), "opened": opened,
            "persist": persist, "cluster": facts["cluster"] or None,
            "remote_home": facts["home"], "remote_user": facts["user"]}


def record_connection(record: JobRecord, override: str | None = None) -> Connection | None:
    """The connection a job was submitted through (`override`: another destination for its
    login); None for a job submitted here."""
    if override is not None:
        return connection(Target.of(override, record.login_config))
    if not record.login:
        return None
    target = Target(record.login, record.login_config)
    return connection(target, record.profile if _profile_target(record.profile) == target
                      else None)


def _profile_target(name: str) -> Target | None:
    """The target of profile `name`'s login section, if it loads and has one."""
    from hpctrain.errors import HpctrainError
    from hpctrain.profiles import load_profile

    try:
        login = load_profile(name).login
        return Target.of(login.host, login.ssh_config) if login else None
    except HpctrainError:
        return None
