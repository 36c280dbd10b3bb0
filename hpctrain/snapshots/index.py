"""What the store remembers of each project, so that a submit redoes little: every file's
digest by its stat (index/<root hash>.json), and git's view of the project when it was last
frozen, with that snapshot (index/<root hash>.state). Standard library only."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

from hpctrain.snapshots.model import FORMAT, Entry, Snapshot
from hpctrain.snapshots.objects import file_digest, write_atomic

# A file changed within this many seconds may change again inside the same mtime tick: its
# digest is not cached (git's "racy" rule).
RACY_S = 2.0
GIT_TIMEOUT_S = 20.0


def git_out(root: Path, *args: str, left_out: tuple[str, ...] = ()) -> bytes | None:
    """git's output, or None where git fails. `left_out`: paths git need not even walk (the
    runs folder, which grows with every submit); a git older than exclude pathspecs (1.9)
    is asked again for everything, which the callers filter anyway."""
    if left_out:
        spec = ("--", ".", *(f":(exclude,literal){p}" for p in left_out))
        out = git_out(root, *args, *spec)
        if out is not None:
            return out
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                              timeout=GIT_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


# --- git's view: an unchanged project in two git calls ------------------------------------


def git_view(root: Path, left_out: tuple[str, ...]) -> str | None:
    """A digest of the project's files as git sees them, or None where it may not be trusted.

    Tracked files that git does not list as modified hold their index blob (git's own racy
    check stands behind `ls-files -m`), so the index entries (blob, mode and git's stat of
    each), plus the exact stat of every modified or untracked file, fix every file's content.
    Not trusted: outside git, with .gitattributes (filters may give one blob several work-tree
    contents), or with a file changed in the last RACY_S seconds."""
    tracked = git_out(root, "ls-files", "-z", "--stage", "--debug")
    changed = git_out(root, "ls-files", "-z", "--modified", "--others", "--exclude-standard",
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


def known(store: Path, root: Path, state: str) -> Snapshot | None:
    """The snapshot this store froze from exactly this state of the project, if still whole."""
    try:
        record = json.loads(_state_path(store, root).read_text())
        snap = record["snapshot"]
        found = Snapshot(id=str(snap["id"]), files=int(snap["files"]), bytes=int(snap["bytes"]),
                         added_files=0, added_bytes=0, source=str(snap["source"]),
                         store=str(store))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if record.get("state") != state or not found.tree.is_dir():
        return None  # another state, or collected since
    return found


def remember(store: Path, root: Path, state: str, snap: Snapshot) -> None:
    keep = {k: getattr(snap, k) for k in ("id", "files", "bytes", "source")}
    write_atomic(_state_path(store, root), json.dumps({"state": state, "snapshot": keep}))


# --- hashing, with the per-project index ----------------------------------------------------


def _index_path(store: Path, root: Path) -> Path:
    key = hashlib.sha256(os.fsencode(str(root))).hexdigest()[:24]
    return store / "index" / f"{key}.json"


def hash_all(root: Path, store: Path, entries: list[Entry]) -> None:
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
        cached = index.get(e.path)
        if isinstance(cached, list) and cached[:4] == key:
            e.digest = str(cached[4])
        else:
            e.digest = file_digest(Path(os.path.join(top, e.path)))
        if e.stamp[0] < racy_ns:
            fresh[e.path] = [*key, e.digest]
        elif isinstance(cached, list):
            # Just edited: its new digest is not trusted yet; the old entry, which no longer
            # matches, spares rewriting the whole index on every submit of that second.
            fresh[e.path] = cached
    if fresh != index:
        write_atomic(index_file, json.dumps(fresh, separators=(",", ":")))
