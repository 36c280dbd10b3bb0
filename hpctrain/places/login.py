"""A login node as a place: SLURM over the ssh master, the project synced to its workdir."""

from __future__ import annotations

import dataclasses
import io
import json
import shlex
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from hpctrain.errors import RemoteError
from hpctrain.places.base import GitState, git_diff, git_state
from hpctrain.places.local import check_copies
from hpctrain.remote import site as sites
from hpctrain.remote import sync as syncing
from hpctrain.remote.connection import Connection

if TYPE_CHECKING:
    from hpctrain.plan import JobRequest
    from hpctrain.profiles.model import Login
    from hpctrain.rundir import RunFile
    from hpctrain.slurm.client import SlurmClient
    from hpctrain.snapshots.spec import CodeSpec
    from hpctrain.snapshots.store import Collected, Snapshot


def python_env(choice: str | None, login_python: str | None) -> str | None:
    """The remote environment jobs activate: --python-env, else login.python; 'none': none."""
    if choice == "none":
        return None
    return choice or login_python


@dataclass
class LoginPlace:
    """Submit from a laptop through a login: the laptop's project is mirrored at `workdir`."""

    conn: Connection
    # The profile's login section (its workdir and python), if the login came from a profile.
    section: Login | None = None
    # --python-env as given (None: the login section's; 'none': no environment).
    python_choice: str | None = None
    local_root: Path = field(default_factory=Path.cwd)

    @property
    def login(self) -> str:
        return self.conn.target.host

    @property
    def login_config(self) -> str | None:
        return self.conn.target.ssh_config

    @cached_property
    def workdir(self) -> Path:
        """login.workdir, else ~/hpctrain-projects/<local dir name> (asked once: a round trip)."""
        return Path(sites.remote_workdir(self.conn, self.section, self.local_root))

    @property
    def user(self) -> str:
        return self.conn.facts()["user"]

    @cached_property
    def _client(self) -> SlurmClient:
        return sites.slurm_client(self.conn)

    def slurm_client(self) -> SlurmClient:
        return self._client

    def cluster(self, client: SlurmClient, recorded: str) -> str:
        # A login whose SLURM does not name its cluster is still the one the jobs went to.
        return client.cluster_name() or recorded

    def adapt(self, req: JobRequest) -> JobRequest:
        output_dir = req.profile.output_dir
        if output_dir.startswith("~"):
            output_dir = self.conn.absolute(output_dir)
        profile = dataclasses.replace(req.profile, output_dir=output_dir)
        remote_python = python_env(self.python_choice, self.section.python if self.section
                                   else None)
        return dataclasses.replace(req, profile=profile, python_env=remote_python)

    def check(self) -> None:
        self.conn.require()

    def check_files(self, run_dir: Path, files: Sequence[RunFile]) -> None:
        # The copies are made from the laptop's files (the run directory is made over there).
        check_copies(self.local_copy(f.copy_of) for f in files if f.copy_of is not None)

    def sync_project(self, output_dir: str) -> syncing.SyncReport:
        return syncing.sync(self.conn, self.local_root, str(self.workdir), _excluded(output_dir))

    def sync_facts(self, synced: syncing.SyncReport | None) -> dict[str, object]:
        return {"login": self.login, "synced_files": synced.files if synced else 0,
                "ssh_round_trips": self.conn.round_trips}

    def sync_notes(self, synced: syncing.SyncReport | None) -> tuple[str, ...]:
        return (f"synced {synced.files if synced else 0} file(s) "
                f"({synced.source if synced else 'nothing'}) to {self.login}:{self.workdir}",)

    def local_copy(self, remote: Path) -> Path:
        """The laptop file a remote path under the workdir mirrors."""
        try:
            return self.local_root / PurePosixPath(remote).relative_to(self.workdir)
        except ValueError:
            return remote

    def create_run_dir(self, run_dir: Path, files: Sequence[RunFile]) -> None:
        """Upload the run directory's files (one round trip); fail if it exists there."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for f in files:
                data = (self.local_copy(f.copy_of).read_bytes() if f.copy_of is not None
                        else (f.text or "").encode())
                # A sweep's points have their files in folders below the run directory.
                info = tarfile.TarInfo(str(f.path.relative_to(run_dir)))
                info.size, info.mode = len(data), f.mode or 0o644
                tar.addfile(info, io.BytesIO(data))
        quoted = shlex.quote(str(run_dir))
        command = (f"mkdir -p -- {shlex.quote(str(run_dir.parent))} && "
                   f"mkdir -- {quoted} && tar -xf - -C {quoted}")
        _out, err, code = self.conn.run(command, input=buf.getvalue())
        if code != 0:
            raise RemoteError(
                f"cannot create the run directory {run_dir} on {self.login}: "
                f"{err.decode(errors='replace').strip()}",
                "choose a writable login.workdir or output_dir in the profile")

    def check_code(self, spec: CodeSpec) -> CodeSpec:
        from hpctrain.snapshots.spec import check_here

        # The files are the laptop's; in-place data may exist on the login only.
        return check_here(spec, self.local_root, in_place_here=False)

    def freeze_code(self, spec: CodeSpec) -> Snapshot:
        """Freeze the synced copy on the login (one round trip): exactly the files the laptop
        listed, so that a file deleted here but left over there is not in the snapshot."""
        listed = spec.listing or self.check_code(spec).listing
        assert listed is not None
        names = b"".join(e.path.encode("utf-8", "surrogateescape") + b"\0"
                         for e in listed.entries)
        return self._store_script("freeze", spec, names)

    def link_code(self, spec: CodeSpec, snapshot_id: str) -> Snapshot:
        return self._store_script("link", spec, b"", "--snapshot", snapshot_id)

    def _store_script(self, action: str, spec: CodeSpec, stdin: bytes, *extra: str
                      ) -> Snapshot:
        from hpctrain.snapshots.spec import snapshot_from_json

        args = [action, str(spec.project), str(spec.store), str(spec.code_dir), *extra]
        args += [a for p in spec.keep_out for a in ("--keep-out", p)]
        args += [a for p in spec.in_place for a in ("--in-place", p)]
        data = self._script(args, stdin)
        if not isinstance(data, dict):
            raise RemoteError(f"unexpected answer from the snapshot script on {self.login}",
                              "run with --debug and report it")
        return snapshot_from_json(data)

    def collect_code(self, store: Path, keep: set[str], grace_s: float, dry_run: bool
                     ) -> Collected | None:
        from hpctrain.snapshots.store import Collected

        args = ["collect", str(store), *(a for i in sorted(keep) for a in ("--keep", i)),
                "--grace", str(grace_s), *(["--dry-run"] if dry_run else [])]
        data = self._script(args, b"")
        if not isinstance(data, list):
            raise RemoteError(f"unexpected answer from the snapshot script on {self.login}",
                              "run with --debug and report it")
        return (Collected(**{**data[0], "snapshots": tuple(data[0]["snapshots"])})
                if data else None)

    def _script(self, args: list[str], stdin: bytes) -> object:
        """snapshots/store.py run by the login's python3 (one round trip); its JSON answer."""
        from hpctrain.snapshots.spec import script_source

        argv = ["python3", "-c", script_source(), *args]
        out, err, code = self.conn.run(shlex.join(argv), input=stdin)
        try:
            data = json.loads(out.decode("utf-8", "replace").strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise RemoteError(
                f"cannot run the snapshot script on {self.login} (exit {code}): "
                f"{err.decode(errors='replace').strip()[-300:]}",
                "check that python3 (3.8 or later) is on the login's PATH, or submit with "
                "--no-snapshot") from None
        if isinstance(data, dict) and "error" in data:
            raise RemoteError(f"on {self.login}: {data['error']}", data.get("fix"))
        return data

    def write(self, path: Path, text: str) -> None:
        target, partial = shlex.quote(str(path)), shlex.quote(f"{path}.partial")
        _out, err, code = self.conn.run(f"cat > {partial} && mv -f -- {partial} {target}",
                                        input=text.encode())
        if code != 0:
            raise RemoteError(f"cannot write {path} on {self.login}: "
                              f"{err.decode(errors='replace').strip()}",
                              "check that the run directory is writable there")

    def discard(self, run_dir: Path) -> None:
        self.conn.run(f"rm -rf -- {shlex.quote(str(run_dir))}")

    def read_file(self, path: Path, tail: int | None) -> tuple[bytes, int] | None:
        return sites.read_file(self.conn, path, tail)

    def git(self) -> GitState | None:
        # The laptop's repository: the login holds a synced copy without .git history.
        return git_state(self.local_root)

    def git_diff(self) -> str | None:
        return git_diff(self.local_root)


def _excluded(output_dir: str) -> tuple[str, ...]:
    # Run outputs of earlier local runs inside the project are not sent again.
    rel = output_dir.strip("/")
    return () if output_dir.startswith(("/", "~")) or not rel else (f"/{rel}/",)
