"""A login as the other modules see it: SLURM over ssh, a remote run directory, remote logs."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from hpctrain.remote.connection import Connection, Target, shell_command

if TYPE_CHECKING:
    from hpctrain.history import JobRecord
    from hpctrain.profiles.model import Login, Profile
    from hpctrain.slurm.client import SlurmClient
    from hpctrain.slurm.transport import ControllerDownError

# Reading a remote log costs a round trip (over the master, no new connection): not as
# often as a local file.
REMOTE_FILE_POLL_S = 1.0


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


def slurm_client(conn: Connection) -> SlurmClient:
    """The one SLURM client, its commands run on the other end of `conn`."""
    from hpctrain.slurm.client import SlurmClient

    # The timeout as configured here (HPCTRAIN_SLURM_TIMEOUT); no local slurm.conf applies.
    return SlurmClient.over(SshTransport(conn))


def remote_workdir(conn: Connection, login: Login | None, local: Path) -> str:
    """The remote project directory: login.workdir, else ~/hpctrain-projects/<local dir name>."""
    chosen = login.workdir if login and login.workdir else f"~/hpctrain-projects/{local.name}"
    return str(PurePosixPath(conn.absolute(chosen)))


@dataclass
class RemoteFollower:
    """Reads what a remote file gained since the last read (logs.FileFollower's twin)."""

    conn: Connection
    path: Path
    offset: int = 0

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


def read_file(conn: Connection, path: Path, tail: int | None) -> tuple[bytes, int] | None:
    """A remote file (or its last `tail` lines) and its size; None if it does not exist."""
    quoted = shlex.quote(str(path))
    body = f"tail -n {int(tail)} {quoted}" if tail is not None else f"cat {quoted}"
    out, _err, code = conn.run(f"[ -f {quoted} ] || exit 3; wc -c < {quoted}; {body}")
    if code != 0:
        return None
    size_line, _, data = out.partition(b"\n")
    return data, int(size_line.strip() or 0)
