"""The code snapshot store: a project's files frozen by content, and a job's view of them.

Standard library only, and no import of hpctrain: a login runs this very file with
`python3 - freeze ...` (its source on stdin), so a snapshot is made the same way on both sides.

Layout of a store (`<output_dir>/.snapshots`, on the file system the jobs see):

    objects/ab/cdef...[.x]   one read-only file per content (sha256; `.x`: executable)
    manifests/<id>.json      a snapshot: every path with its object, every symlink's target
    trees/<id>/...           the snapshot as a directory tree of hard links to the objects
    index/<root hash>.json   per project: path -> size, mtime, inode, digest (skips rehashing)
    index/<root hash>.state  per project: git's view of it when last frozen, and that snapshot

A snapshot's id is the hash of its manifest, so an unchanged project is the same snapshot and
costs no copy; an edit of one file adds one object and one tree of links. A job's working
directory (`<run dir>/code`) links each top-level entry of the tree, so what a job writes
there stays in its run directory; paths named "in place" link to the live project instead.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

FORMAT = 1
MiB = 1024 * 1024
# Data belongs outside a snapshot: past these a submit is refused with the largest files named.
MAX_FILE_BYTES = 20 * MiB
MAX_TOTAL_BYTES = 512 * MiB
MAX_FILES = 100_000
# A file changed within this many seconds may change again inside the same mtime tick: its
# digest is not cached (git's "racy" rule).
RACY_S = 2.0
GIT_TIMEOUT_S = 20.0
# Outside git: directories never frozen (hidden ones, caches, virtual environments).
SKIPPED_DIRS = frozenset({"__pycache__", "node_modules"})


class SnapshotError(Exception):
    """A project that cannot be frozen: what is wrong and how to fix it."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(what)
        self.what, self.fix = what, fix


@dataclass(frozen=True)
class Limits:
    """How large a project a snapshot takes: per file, in all, and in files."""

    max_file_bytes: int = MAX_FILE_BYTES
    max_total_bytes: int = MAX_TOTAL_BYTES
    max_files: int = MAX_FILES


@dataclass(frozen=True)
class Snapshot:
    """A frozen project: its id, its size, and what this freeze added to the store."""

    id: str
    files: int
    bytes: int
    added_files: int
    added_bytes: int
    # How the files were chosen: "git" (tracked + untracked not ignored) or "walk".
    source: str
    store: str
    in_place: tuple[str, ...] = ()

    @property
    def tree(self) -> Path:
        return Path(self.store) / "trees" / self.id


@dataclass
class Entry:
    """One file of a project as a snapshot lists it."""

    path: str
    size: int = 0
    digest: str = ""
    executable: bool = False
    link: str | None = None  # a symlink's target, kept as it is
    # What the index compares: mtime and ctime in ns, inode.
    stamp: tuple[int, int, int] = (0, 0, 0)


@dataclass
class Listing:
    """The files a freeze takes, each with its size and stat (made once per submit)."""

    entries: list[Entry] = field(default_factory=list)
    source: str = "git"
    # What git says of the project (None: not asked, or not to be trusted); when the store
    # froze that very state before, `known` is that snapshot and `entries` stays empty.
    state: str | None = None
    known: Snapshot | None = None


# --- choosing the files -------------------------------------------------------------------


def project_files(root: Path, left_out: tuple[str, ...] = ()) -> list[str] | None:
    """Files git tracks under `root`, plus untracked ones it does not ignore, less the
    `left_out` paths; None outside git."""
    out = _git_out(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard",
                   left_out=left_out)
    if out is None:
        return None
    # A tracked file deleted in the work tree is listed too (existing() leaves it out).
    return [n for n in out.decode("utf-8", "surrogateescape").split("\0") if n]


def existing(root: Path, names: list[str]) -> list[str]:
    """The names that are there (a file or a link) under `root`."""
    top = str(root)
    return [n for n in names if os.path.lexists(os.path.join(top, n))]


def walked_files(root: Path, skip: tuple[str, ...] = ()) -> list[str]:
    """Outside git: every file, without hidden directories, caches, virtual environments and
    the `skip` paths (the runs folder)."""
    found: list[str] = []
    for top, dirs, files in os.walk(root):
        here = Path(top)
        rel = here.relative_to(root).as_posix()
        prefix = "" if rel == "." else rel + "/"
        keep = []
        for d in dirs:
            if (here / d).is_symlink():
                found.append(prefix + d)  # kept as a link, not followed
            elif not (d.startswith(".") or d in SKIPPED_DIRS or _under(prefix + d, skip)
                      or (here / d / "pyvenv.cfg").exists()):
                keep.append(d)
        dirs[:] = sorted(keep)
        found += [prefix + f for f in files]
    return sorted(found)


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in prefixes)


def _listing(root: Path, keep_out: tuple[str, ...], in_place: tuple[str, ...],
             names: list[str] | None = None) -> Listing:
    left_out = keep_out + in_place
    source = "list"
    if names is None:
        names, source = project_files(root, left_out), "git"
    if names is None:
        names, source = walked_files(root, left_out), "walk"
    out = Listing(source=source)
    top = str(root) + "/"
    exact, under = set(left_out), tuple(p + "/" for p in left_out)
    lstat, is_link, is_file = os.lstat, stat.S_ISLNK, stat.S_ISREG
    for name in names:
        if name in exact or (under and name.startswith(under)):
            continue
        try:
            st = lstat(top + name)
        except FileNotFoundError:
            continue  # tracked, but deleted in the work tree
        if is_link(st.st_mode):
            out.entries.append(Entry(name, link=os.readlink(top + name)))
        elif is_file(st.st_mode):
            out.entries.append(Entry(name, st.st_size, executable=bool(st.st_mode & 0o111),
                                     stamp=(st.st_mtime_ns, st.st_ctime_ns, st.st_ino)))
    return out


def check_project(root: Path, *, keep_out: tuple[str, ...] = (), in_place: tuple[str, ...] = (),
                  limits: Limits = Limits(), in_place_here: bool = True,
                  store: Path | None = None,
                  view: Callable[[Path, tuple[str, ...]], str | None] | None = None) -> Listing:
    """What freeze would refuse, found without reading a file (a dry run); the listing, which
    the same submit's freeze takes. `in_place_here`: the in-place paths are on this machine
    (not only on a login). `store`: the store this machine freezes into, whose record of the
    project's last state spares listing an unchanged project file by file. `view`: what
    asks git_view (spec.py: one asked ahead)."""
    if in_place_here:
        _check_in_place(root, in_place)
    state = (view or git_view)(root, keep_out + in_place) if store is not None else None
    known = _known(store, root, state) if store is not None and state else None
    if known is not None:
        return Listing(source="git", state=state, known=known)
    listing = _listing(root, keep_out, in_place)
    listing.state = state
    _check_limits(listing, limits)
    return listing


# --- git's view: an unchanged project in two git calls ------------------------------------


def _git_out(root: Path, *args: str, left_out: tuple[str, ...] = ()) -> bytes | None:
    """git's output, or None where git fails. `left_out`: paths git need not even walk (the
    runs folder, which grows with every submit); a git older than exclude pathspecs (1.9)
    is asked again for everything, which the callers filter anyway."""
    if left_out:
        spec = ("--", ".", *(f":(exclude,literal){p}" for p in left_out))
        out = _git_out(root, *args, *spec)
        if out is not None:
            return out
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                              timeout=GIT_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def git_view(root: Path, left_out: tuple[str, ...]) -> str | None:
    """A digest of the project's files as git sees them, or None where it may not be trusted.

    Tracked files that git does not list as modified hold their index blob (git's own racy
    check stands behind `ls-files -m`), so the index entries (blob, mode and git's stat of
    each), plus the exact stat of every modified or untracked file, fix every file's content.
    Not trusted: outside git, with .gitattributes (filters may give one blob several work-tree
    contents), or with a file changed in the last RACY_S seconds."""
    tracked = _git_out(root, "ls-files", "-z", "--stage", "--debug")
    changed = _git_out(root, "ls-files", "-z", "--modified", "--others", "--exclude-standard",
                       left_out=left_out)
    if tracked is None or changed is None:
        return None
    if tracked.startswith(b".gitattributes\0") or b"/.gitattributes\0" in tracked \
            or b"\t.gitattributes\0" in tracked:
        return None
    h = hashlib.sha256(json.dumps([FORMAT, str(root), sorted(left_out)]).encode())
    h.update(tracked)
    top, recent = os.fsencode(str(root)) + b"/", time.time() - RACY_S
    skip = tuple(os.fsencode(p) for p in left_out)
    for name in sorted(set(changed.split(b"\0"))):
        if not name or any(name == p or name.startswith(p + b"/") for p in skip):
            continue
        try:
            st = os.lstat(top + name)
        except FileNotFoundError:
            h.update(b"\0gone\0" + name)
            continue
        if max(st.st_mtime, st.st_ctime) > recent:
            return None
        h.update(b"\0%s\0%d %d %d %d %d" % (name, st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                                           st.st_ino, st.st_mode))
    return h.hexdigest()


def _state_path(store: Path, root: Path) -> Path:
    return _index_path(store, root).with_suffix(".state")


def _known(store: Path, root: Path, state: str) -> Snapshot | None:
    """The snapshot this store froze from exactly this state of the project, if still whole."""
    try:
        known = json.loads(_state_path(store, root).read_text())
        snap = known["snapshot"]
        found = Snapshot(id=str(snap["id"]), files=int(snap["files"]), bytes=int(snap["bytes"]),
                         added_files=0, added_bytes=0, source=str(snap["source"]),
                         store=str(store))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if known.get("state") != state or not found.tree.is_dir():
        return None  # another state, or collected since
    return found


def _remember(store: Path, root: Path, state: str, snap: Snapshot) -> None:
    keep = {k: getattr(snap, k) for k in ("id", "files", "bytes", "source")}
    _write_atomic(_state_path(store, root), json.dumps({"state": state, "snapshot": keep}))


def _check_in_place(root: Path, in_place: tuple[str, ...]) -> None:
    for p in in_place:
        if p.startswith("/") or ".." in p.split("/") or not p.strip("/"):
            raise SnapshotError(f"--in-place {p}: not a path inside the project",
                                "name a file or directory relative to the project's top")
        if not os.path.lexists(root / p):
            raise SnapshotError(f"--in-place {p}: no such path in the project {root}",
                                "name a file or directory inside the project, relative to it")


def _size(n: float) -> str:
    for unit, scale in (("GiB", MiB * 1024), ("MiB", MiB), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} bytes"


def _check_limits(listing: Listing, limits: Limits) -> None:
    files = [e for e in listing.entries if e.link is None]
    total = sum(e.size for e in files)
    big = sorted((e for e in files if e.size > limits.max_file_bytes), key=lambda e: -e.size)
    if not big and total <= limits.max_total_bytes and len(files) <= limits.max_files:
        return
    largest = big or sorted(files, key=lambda e: -e.size)
    named = ", ".join(f"{e.path} ({_size(e.size)})" for e in largest[:5])
    if big:
        what = f"{len(big)} file(s) over {_size(limits.max_file_bytes)}"
    elif total > limits.max_total_bytes:
        what = f"{len(files)} files, {_size(total)} (over {_size(limits.max_total_bytes)})"
    else:
        what = f"{len(files)} files (over {limits.max_files})"
    raise SnapshotError(
        f"the project is too large to snapshot for the job: {what}; largest: {named}",
        "data does not belong in a code snapshot: name it with --in-place PATH (the job "
        "reads it where it is), keep it out of the project (.gitignore in a git "
        "repository), or submit with --no-snapshot (docs/jobs.md, \"Code snapshots\")")


# --- hashing, with the per-project index ----------------------------------------------------


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _index_path(store: Path, root: Path) -> Path:
    key = hashlib.sha256(os.fsencode(str(root))).hexdigest()[:24]
    return store / "index" / f"{key}.json"


def _hash_all(root: Path, store: Path, entries: list[Entry]) -> None:
    """Fill each file's digest, from the index where size, mtime, ctime and inode still match."""
    index_file = _index_path(store, root)
    try:
        index = json.loads(index_file.read_text())
    except (OSError, ValueError):
        index = {}
    fresh: dict[str, list[object]] = {}
    racy_ns = int((time.time() - RACY_S) * 1e9)
    top = str(root)
    for e in entries:
        if e.link is not None:
            continue
        key = [e.size, *e.stamp]
        known = index.get(e.path)
        if isinstance(known, list) and known[:4] == key:
            e.digest = str(known[4])
        else:
            e.digest = _digest(Path(os.path.join(top, e.path)))
        if e.stamp[0] < racy_ns:
            fresh[e.path] = [*key, e.digest]
        elif isinstance(known, list):
            # Just edited: its new digest is not trusted yet; the old entry, which no longer
            # matches, spares rewriting the whole index on every submit of that second.
            fresh[e.path] = known
    if fresh != index:
        _write_atomic(index_file, json.dumps(fresh, separators=(",", ":")))


# --- the store ------------------------------------------------------------------------------


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _object_file(store: Path, digest: str, executable: bool) -> str:
    """Where a content is stored: objects/ab/cdef...[.x] (a string: the per-file loops)."""
    name = digest[2:] + (".x" if executable else "")
    return os.path.join(str(store), "objects", digest[:2], name)


def _object(store: Path, e: Entry) -> str:
    return _object_file(store, e.digest, e.executable)


def _add_object(store: Path, root: Path, e: Entry) -> bool:
    """Copy one file's content into the store unless it is there; True if it was added."""
    target = _object(store, e)
    if os.path.exists(target):
        return False
    os.makedirs(os.path.dirname(target), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".tmp-")
    os.close(fd)
    shutil.copyfile(os.path.join(str(root), e.path), tmp)
    # A copy that changed under us must not enter the store under the old name.
    if _digest(Path(tmp)) != e.digest:
        os.unlink(tmp)
        raise SnapshotError(f"{e.path} changed while it was being snapshotted",
                            "submit again once the file is saved")
    os.chmod(tmp, 0o555 if e.executable else 0o444)
    os.replace(tmp, target)
    return True


def _manifest(entries: list[Entry]) -> str:
    rows = sorted(entries, key=lambda e: e.path)
    return json.dumps({
        "format": FORMAT,
        "files": [[e.path, e.digest, int(e.executable), e.size] for e in rows if e.link is None],
        "links": [[e.path, e.link] for e in rows if e.link is not None],
    }, separators=(",", ":"), sort_keys=True)


def _build_tree(store: Path, snap_id: str, entries: list[Entry]) -> None:
    """trees/<id>: hard links to the objects (copies where the file system has none)."""
    final = store / "trees" / snap_id
    if final.exists():
        return
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = tempfile.mkdtemp(dir=final.parent, prefix=".tmp-")
    dirs = sorted({os.path.dirname(e.path) for e in entries} - {""})
    for d in dirs:
        os.makedirs(os.path.join(tmp, d), exist_ok=True)
    for e in entries:
        dst = os.path.join(tmp, e.path)
        if e.link is not None:
            os.symlink(e.link, dst)
            continue
        try:
            os.link(_object(store, e), dst)
        except OSError:
            shutil.copy2(_object(store, e), dst)
    try:
        os.rename(tmp, final)
    except OSError:
        # Another submit of the same snapshot got there first: it is the same tree.
        _remove_tree(Path(tmp))
        return
    # Read-only, so that a job cannot change the code the next job of this snapshot runs.
    for d in reversed(dirs):
        os.chmod(os.path.join(str(final), d), 0o555)
    os.chmod(final, 0o555)


def _remove_tree(path: Path) -> None:
    """Remove a tree whose directories were made read-only."""
    for top, dirs, _files in os.walk(path):
        os.chmod(top, 0o755)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
    shutil.rmtree(path)


def freeze(root: Path, store: Path, *, keep_out: tuple[str, ...] = (),
           in_place: tuple[str, ...] = (), limits: Limits = Limits(),
           names: list[str] | None = None, listing: Listing | None = None) -> Snapshot:
    """Freeze the project at `root` into `store`; the same files give the same snapshot.

    `names`: the files to freeze (a login's copy freezes what the laptop's git listed);
    `listing`: this submit's check_project, not made again."""
    root = Path(os.path.abspath(root))
    if listing is not None and listing.known is not None:
        return replace(listing.known, in_place=tuple(in_place))
    if listing is None:
        _check_in_place(root, in_place)
        listing = _listing(root, keep_out, in_place, names)
        _check_limits(listing, limits)
    entries = listing.entries
    _hash_all(root, store, entries)
    manifest = _manifest(entries)
    snap_id = hashlib.sha256(manifest.encode()).hexdigest()[:20]
    # The tree exists: this very snapshot was stored whole before (gc keeps a kept tree's
    # objects), so there is nothing to store.
    done = (store / "trees" / snap_id).exists()
    added = [] if done else [e for e in entries if e.link is None and
                             _add_object(store, root, e)]
    manifest_file = store / "manifests" / f"{snap_id}.json"
    if not done and not manifest_file.exists():
        _write_atomic(manifest_file, manifest + "\n")
    if not done:
        _build_tree(store, snap_id, entries)
    files = [e for e in entries if e.link is None]
    snap = Snapshot(
        id=snap_id, files=len(files), bytes=sum(e.size for e in files),
        added_files=len(added), added_bytes=sum(e.size for e in added),
        source=listing.source, store=str(store), in_place=tuple(in_place))
    if listing.state is not None:
        _remember(store, root, listing.state, snap)
    return snap


# --- a job's working directory ------------------------------------------------------------


def link_code(code_dir: Path, snap: Snapshot, root: Path, keep_out: tuple[str, ...] = ()
              ) -> None:
    """Make `code_dir` the job's view of the project: the snapshot's entries; live links for
    the in-place paths and for the top-level directories the snapshot left out (data, a venv:
    what git ignores). Left-out files are not linked: on a login they may be stale copies."""
    root = Path(os.path.abspath(root))
    code_dir.mkdir(parents=True)
    live = {p.strip("/"): root / p.strip("/") for p in snap.in_place}
    frozen = set(os.listdir(snap.tree))
    for name in os.listdir(root):
        # Not .git: the snapshot is no checkout, and git would describe the live tree.
        if (name not in frozen and name != ".git" and not _under(name, keep_out)
                and not _is_parent(name, live) and (root / name).is_dir()):
            live[name] = root / name
    _link_level(code_dir, snap.tree, "", live)


def _is_parent(name: str, live: dict[str, Path]) -> bool:
    return any(p.startswith(name + "/") for p in live)


def _link_level(dst: Path, tree: Path, rel: str, live: dict[str, Path]) -> None:
    names = set(os.listdir(tree / rel)) if (tree / rel).is_dir() else set()
    names |= {p[len(rel):].split("/")[0] for p in live if rel == "" or p.startswith(rel)}
    for name in sorted(names):
        path = f"{rel}{name}"
        if path in live:
            os.symlink(live[path], dst / name)
        elif _is_parent(path, live):
            (dst / name).mkdir()
            _link_level(dst / name, tree, path + "/", live)
        else:
            os.symlink(tree / path, dst / name)


def manifest_of(store: Path, snap_id: str) -> dict[str, object]:
    """A snapshot's manifest: {"files": [[path, digest, exec, size]], "links": [[path, to]]}."""
    data: dict[str, object] = json.loads((store / "manifests" / f"{snap_id}.json").read_text())
    return data


def object_path(store: Path, digest: str, executable: bool) -> Path:
    return Path(_object_file(store, digest, executable))


# --- collecting what no job needs -----------------------------------------------------------

# Younger than this, a tree, manifest or object may belong to a submit still freezing.
GC_GRACE_S = 3600.0


@dataclass(frozen=True)
class Collected:
    """What `collect` removed (or, `dry_run`, would remove) from one store."""

    store: str
    snapshots: tuple[str, ...]
    objects: int
    bytes: int
    kept: int


def snapshot_ids(store: Path) -> list[str]:
    """Every snapshot the store holds (by its manifest)."""
    return sorted(p.stem for p in (store / "manifests").glob("*.json"))


def collect(store: Path, keep: set[str], *, dry_run: bool = False,
            grace_s: float = GC_GRACE_S) -> Collected:
    """Remove the snapshots not in `keep`, then every object no kept snapshot names."""
    now = time.time()

    def young(path: Path) -> bool:
        try:
            return now - path.lstat().st_mtime < grace_s
        except FileNotFoundError:
            return False

    ids = snapshot_ids(store)
    drop = [i for i in ids if i not in keep and not young(store / "manifests" / f"{i}.json")]
    kept = [i for i in ids if i not in drop]
    needed: set[str] = set()
    for i in kept:
        files = manifest_of(store, i)["files"]
        needed |= {_object_file(store, f[1], bool(f[2]))
                   for f in files}  # type: ignore[attr-defined]
    objects, freed = 0, 0
    for obj in sorted((store / "objects").glob("*/*")):
        if obj.name.startswith(".tmp-") or str(obj) in needed or young(obj):
            continue
        objects, freed = objects + 1, freed + obj.stat().st_size
        if not dry_run:
            obj.unlink()
    if not dry_run:
        for i in drop:
            if (store / "trees" / i).exists():
                _remove_tree(store / "trees" / i)
            (store / "manifests" / f"{i}.json").unlink()
        if objects:
            # Its digests may name removed objects: rebuilt by the next freeze.
            shutil.rmtree(store / "index", ignore_errors=True)
    return Collected(str(store), tuple(drop), objects, freed, len(kept))


# --- run as a script: the login's side of a remote submit ----------------------------------


def _main(argv: list[str]) -> int:
    """`freeze ROOT STORE CODE_DIR [--keep-out P]... [--in-place P]...`, the files to freeze
    NUL-separated on stdin; `link ROOT STORE CODE_DIR --snapshot ID [...]` links an existing
    snapshot (a rerun). Prints the snapshot (or the error) as JSON."""
    import argparse

    if argv[:1] == ["collect"]:
        return _collect_main(argv[1:])
    p = argparse.ArgumentParser(prog="hpctrain-snapshot")
    p.add_argument("action", choices=["freeze", "link"])
    p.add_argument("root")
    p.add_argument("store")
    p.add_argument("code_dir")
    p.add_argument("--keep-out", action="append", default=[])
    p.add_argument("--in-place", action="append", default=[])
    p.add_argument("--snapshot")
    a = p.parse_args(argv)
    root, store = Path(a.root).expanduser(), Path(a.store).expanduser()
    keep_out, in_place = tuple(a.keep_out), tuple(a.in_place)
    try:
        if a.action == "link":
            snap = existing_snapshot(store, a.snapshot, in_place)
        else:
            names = [n for n in sys.stdin.buffer.read().decode("utf-8", "surrogateescape")
                     .split("\0") if n]
            snap = freeze(root, store, keep_out=keep_out, in_place=in_place, names=names)
        link_code(Path(a.code_dir).expanduser(), snap, root, keep_out)
    except SnapshotError as e:
        print(json.dumps({"error": e.what, "fix": e.fix}))
        return 3
    except OSError as e:
        print(json.dumps({"error": f"snapshot failed: {e}", "fix": "check the file system"}))
        return 3
    print(json.dumps(asdict(snap)))
    return 0


def _collect_main(argv: list[str]) -> int:
    """`collect STORE... --keep ID... --grace S [--dry-run]`: gc on a login (JSON list out)."""
    import argparse

    p = argparse.ArgumentParser(prog="hpctrain-snapshot collect")
    p.add_argument("stores", nargs="+")
    p.add_argument("--keep", action="append", default=[])
    p.add_argument("--grace", type=float, default=GC_GRACE_S)
    p.add_argument("--dry-run", action="store_true")
    a = p.parse_args(argv)
    done = [asdict(collect(Path(s).expanduser(), set(a.keep), dry_run=a.dry_run,
                           grace_s=a.grace))
            for s in a.stores if (Path(s).expanduser() / "manifests").is_dir()]
    print(json.dumps(done))
    return 0


def existing_snapshot(store: Path, snap_id: str, in_place: tuple[str, ...] = ()) -> Snapshot:
    """A snapshot the store holds, to run again; SnapshotError once gc has removed it."""
    if not snap_id or not (store / "trees" / snap_id).is_dir():
        raise SnapshotError(f"snapshot {snap_id} is no longer in {store} (hpctrain gc removed "
                            "it, or the store moved)", "submit the job again from the project")
    files: list[list[object]] = manifest_of(store, snap_id)["files"]  # type: ignore[assignment]
    return Snapshot(id=snap_id, files=len(files), bytes=sum(int(str(f[3])) for f in files),
                    added_files=0, added_bytes=0, source="rerun", store=str(store),
                    in_place=in_place)


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
