"""A login node as a place: SLURM over the ssh master, the project synced to its workdir.

Its disk (run files, code snapshots) is places/loginfiles.py's; which login a profile or a
recorded job goes through, places/connections.py's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from hpctrain.places.base import FileRead, GitState, git_diff, git_state
from hpctrain.places.connections import profile_connection, record_connection
from hpctrain.places.loginfiles import (
    LoginCode,
    LoginFiles,
    LoginSide,
    read_answer,
    read_command,
)
from hpctrain.remote.connection import Connection, shell_command

if TYPE_CHECKING:
    from hpctrain.history import JobRecord
    from hpctrain.plan import JobRequest
    from hpctrain.profiles.model import Login, Profile
    from hpctrain.remote import sync as syncing
    from hpctrain.slurm.client import SlurmClient
    from hpctrain.slurm.transport import ControllerDownError


def python_env(choice: str | None, login_python: str | None) -> str | None:
    """The remote environment jobs activate: --python-env, else login.python; 'none': none."""
    if choice == "none":
        return None
    return choice or login_python


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

    def run_attached(self, argv: tuple[str, ...]) -> int:
        return self.conn.interactive(shell_command(argv))

    def reach(self, argv: tuple[str, ...]) -> tuple[str, ...]:
        # Through the master like every other command: no second connection, no prompt.
        return (*self.conn.client_argv(), "--", self.conn.target.host, shell_command(argv))


class LoginProject:
    """The laptop's project mirrored at the login's workdir by rsync."""

    def ask_ahead(self: LoginSide, req: JobRequest, acting: bool) -> None:
        """Nothing ahead: a login's questions share its one connection, one at a time."""

    @cached_property
    def workdir(self: LoginSide) -> Path:
        """login.workdir, else ~/hpctrain-projects/<local dir name> (asked once: a round trip)."""
        section, local = self.section, self.local_root
        chosen = (section.workdir if section and section.workdir
                  else f"~/hpctrain-projects/{local.name}")
        return Path(PurePosixPath(self.conn.absolute(chosen)))

    def local_copy(self: LoginSide, remote: Path) -> Path:
        """The laptop file a remote path under the workdir mirrors."""
        try:
            return self.local_root / PurePosixPath(remote).relative_to(self.workdir)
        except ValueError:
            return remote

    def adapt(self: LoginSide, req: JobRequest) -> JobRequest:
        output_dir = req.profile.output_dir
        if output_dir.startswith("~"):
            output_dir = self.conn.absolute(output_dir)
        profile = dataclasses.replace(req.profile, output_dir=output_dir)
        remote_python = python_env(self.python_choice, self.section.python if self.section
                                   else None)
        return dataclasses.replace(req, profile=profile, python_env=remote_python)

    def check(self: LoginSide) -> None:
        self.conn.require()

    def sync_project(self: LoginSide, output_dir: str) -> syncing.SyncReport:
        # Imported here: the sync (and the snapshot store it reads) is a submit's, not status's.
        from hpctrain.remote import sync as syncing

        return syncing.sync(self.conn, self.local_root, str(self.workdir), _excluded(output_dir))

    def sync_facts(self: LoginSide, synced: syncing.SyncReport | None) -> dict[str, object]:
        return {"login": self.conn.target.host, "synced_files": synced.files if synced else 0,
                "ssh_round_trips": self.conn.round_trips}

    def sync_notes(self: LoginSide, synced: syncing.SyncReport | None) -> tuple[str, ...]:
        return (f"synced {synced.files if synced else 0} file(s) "
                f"({synced.source if synced else 'nothing'}) to "
                f"{self.conn.target.host}:{self.workdir}",)

    def git(self: LoginSide) -> GitState | None:
        # The laptop's repository: the login holds a synced copy without .git history.
        return git_state(self.local_root)

    def git_diff(self: LoginSide) -> str | None:
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
        commands = [shell_command(a) for a in asks] + [read_command(p, t) for p, t in reads]
        answers = self.conn.run_many(commands, timeout_s=self.slurm_client().timeout_s)
        files = [read_answer(out.encode(), code)
                 for out, _err, code in answers[len(asks):]]
        return answers[:len(asks)], files


def _excluded(output_dir: str) -> tuple[str, ...]:
    # Run outputs of earlier local runs inside the project are not sent again.
    rel = output_dir.strip("/")
    return () if output_dir.startswith(("/", "~")) or not rel else (f"/{rel}/",)

