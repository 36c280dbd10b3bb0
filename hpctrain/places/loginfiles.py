"""A login's disk: the run directory's files and the code snapshots, each one round trip.

What LoginPlace does on the login's disk besides SLURM: upload, write, read and follow a
run's files, and run the snapshot modules there with the login's python3.
"""

from __future__ import annotations

import io
import json
import shlex
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from hpctrain.errors import RemoteError
from hpctrain.places.base import RUNS_GITIGNORE
from hpctrain.places.local import check_copies
from hpctrain.remote.connection import Connection

if TYPE_CHECKING:
    from hpctrain.profiles.model import Login
    from hpctrain.snapshots.gc import Collected
    from hpctrain.snapshots.model import Snapshot
    from hpctrain.snapshots.spec import CodeSpec
    from hpctrain.values.rundir import RunFile

# Reading a remote log costs a round trip (over the master, no new connection): not as
# often as a local file.
REMOTE_FILE_POLL_S = 1.0


class LoginSide(Protocol):
    """What each group of LoginPlace uses of the others."""

    conn: Connection
    section: Login | None
    python_choice: str | None
    local_root: Path

    @property
    def workdir(self) -> Path: ...

    def local_copy(self, remote: Path) -> Path: ...

    def check_code(self, spec: CodeSpec) -> CodeSpec: ...


def read_command(path: Path, tail: int | None) -> str:
    """The shell command whose answer `read_answer` reads: the size, then the file or its end."""
    quoted = shlex.quote(str(path))
    body = f"tail -n {int(tail)} {quoted}" if tail is not None else f"cat {quoted}"
    return f"[ -f {quoted} ] || exit 3; wc -c < {quoted}; {body}"


def read_answer(out: bytes, code: int) -> tuple[bytes, int] | None:
    if code != 0:
        return None
    size_line, _, data = out.partition(b"\n")
    return data, int(size_line.strip() or 0)


# Marks the answer's lines: a login's shell start-up files may print to stdout too.
_MISSING = "@@hpctrain-missing"


def exists_command(paths: Sequence[str]) -> str:
    """The shell command whose answer `missing_answer` reads: each path quoted whole (never
    a word the shell splits, expands or takes for test's operator), ~/ left to $HOME."""
    def quoted(path: str) -> str:
        return '"$HOME"/' + shlex.quote(path[2:]) if path.startswith("~/") else shlex.quote(path)

    return "; ".join(f"[ -e {quoted(p)} ] || echo {_MISSING} {i}" for i, p in enumerate(paths))


def missing_answer(paths: Sequence[str], out: bytes) -> list[str]:
    """The paths `exists_command(paths)` said are missing, in their order."""
    said = (line.removeprefix(_MISSING + " ") for line in
            out.decode(errors="replace").splitlines() if line.startswith(_MISSING + " "))
    return [paths[int(i)] for i in said if i.isdigit() and int(i) < len(paths)]


# Marks where the copy of `pack_command` begins (after anything the login's start-up printed).
_PACKED = b"@@hpctrain-tar\n"


def pack_command(folder: Path) -> str:
    """The shell command whose answer `unpack` reads: a gzipped tar of the files and folders
    inside `folder` named on its standard input (`pack_input`); those missing are left out, and
    no folder yet is an empty answer. Names come on stdin, not in the command: a sweep's
    thousands would pass the 128 KiB one argument may hold."""
    return (f"cd -- {shlex.quote(str(folder))} 2>/dev/null || exit 0; "
            f"printf '{_PACKED.decode().strip()}\\n'; "
            # The monitor appends while tar reads: GNU tar exits 1 ("file changed"), its copy
            # whole up to the size it saw; a torn last line is skipped by every reader.
            "exec tar -czf - --ignore-failed-read --warning=no-file-changed --null -T -")


def pack_input(names: Sequence[str]) -> bytes:
    """The names as `pack_command` reads them: NUL-ended, each from ./ (never an option)."""
    return b"".join(b"./" + name.encode() + b"\0" for name in names)


def unpack(out: bytes, into: Path) -> None:
    """Put the files of `pack_command`'s answer into `into`: regular files and folders only,
    each inside it (a link or a `..` from the login is left out)."""
    import tarfile

    start = out.find(_PACKED)
    if start < 0:
        return
    try:
        with tarfile.open(fileobj=io.BytesIO(out[start + len(_PACKED):]), mode="r:gz") as tar:
            members = [m for m in tar.getmembers() if (m.isfile() or m.isdir())
                       and not m.name.startswith("/") and ".." not in Path(m.name).parts]
            if hasattr(tarfile, "data_filter"):  # Python 3.10.12 and later
                tar.extractall(into, members, filter="data")
            else:
                tar.extractall(into, members)  # noqa: S202 (members checked above)
    except (tarfile.TarError, EOFError, OSError) as e:
        raise RemoteError(f"the copy of the run directory's files is unreadable: {e}",
                          "run the command again; with --debug if it fails again") from None


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

    def check_files(self: LoginSide, run_dir: Path, files: Sequence[RunFile]) -> None:
        # The copies are made from the laptop's files (the run directory is made over there).
        check_copies(self.local_copy(f.copy_of) for f in files if f.copy_of is not None)

    def paths_missing(self: LoginSide, paths: Sequence[str]) -> list[str]:
        """One round trip: `[ -e ]` of each path on the login."""
        if not paths:
            return []
        out, err, code = self.conn.run(exists_command(paths))
        if code != 0:
            raise RemoteError(f"cannot look for {', '.join(paths)} on {self.conn.target.host}: "
                              f"{err.decode(errors='replace').strip()}",
                              "run the command again with --debug, and check the login")
        return missing_answer(paths, out)

    def create_run_dir(self: LoginSide, run_dir: Path, files: Sequence[RunFile]) -> None:
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

    def write(self: LoginSide, path: Path, text: str) -> None:
        target, partial = shlex.quote(str(path)), shlex.quote(f"{path}.partial")
        _out, err, code = self.conn.run(f"cat > {partial} && mv -f -- {partial} {target}",
                                        input=text.encode())
        if code != 0:
            raise RemoteError(f"cannot write {path} on {self.conn.target.host}: "
                              f"{err.decode(errors='replace').strip()}",
                              "check that the run directory is writable there")

    def discard(self: LoginSide, run_dir: Path) -> None:
        self.conn.run(f"rm -rf -- {shlex.quote(str(run_dir))}")

    def read_file(self: LoginSide, path: Path, tail: int | None) -> tuple[bytes, int] | None:
        out, _err, code = self.conn.run(read_command(path, tail))
        return read_answer(out, code)

    def follower(self: LoginSide, path: Path, offset: int) -> RemoteFollower:
        return RemoteFollower(self.conn, path, offset)

    @contextmanager
    def readable(self: LoginSide, run_dir: Path, names: Sequence[str]) -> Iterator[Path]:
        """One round trip: a tar of `names` from the login, unpacked into a folder of this
        machine's that lives as long as the `with` block."""
        import tempfile

        out, err, code = self.conn.run(pack_command(run_dir), input=pack_input(names))
        if code not in (0, 1):
            raise RemoteError(f"cannot read {run_dir} on {self.conn.target.host}: "
                              f"{err.decode(errors='replace').strip()}",
                              "run the command again with --debug, and check the login")
        with tempfile.TemporaryDirectory(prefix="hpctrain-run-") as copy:
            unpack(out, Path(copy))
            yield Path(copy)


class LoginCode:
    """Code snapshots made on the login by its python3 running the snapshot modules."""

    def check_code(self: LoginSide, spec: CodeSpec) -> CodeSpec:
        from hpctrain.snapshots.spec import check_here

        # The files are the laptop's; in-place data may exist on the login only.
        return check_here(spec, self.local_root, in_place_here=False)

    def freeze_code(self: LoginSide, spec: CodeSpec) -> Snapshot:
        """Freeze the synced copy on the login (one round trip): exactly the files the laptop
        listed, so that a file deleted here but left over there is not in the snapshot."""
        listed = spec.listing or self.check_code(spec).listing
        assert listed is not None
        names = b"".join(e.path.encode("utf-8", "surrogateescape") + b"\0"
                         for e in listed.entries)
        return _store_script(self.conn, "freeze", spec, names)

    def link_code(self: LoginSide, spec: CodeSpec, snapshot_id: str) -> Snapshot:
        return _store_script(self.conn, "link", spec, b"", "--snapshot", snapshot_id)

    def collect_code(self: LoginSide, store: Path, keep: set[str], grace_s: float, dry_run: bool
                     ) -> Collected | None:
        from hpctrain.snapshots.gc import Collected

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
    """snapshots/script.py run by the login's python3 (one round trip); its JSON answer."""
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
