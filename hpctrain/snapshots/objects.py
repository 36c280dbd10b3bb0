"""The content-addressed store on disk: objects, manifests and trees of links (the layout:
snapshots/__init__.py). Standard library only: a login runs it (snapshots/spec.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from hpctrain.snapshots.model import FORMAT, Entry, SnapshotError


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def object_file(store: Path, digest: str, executable: bool) -> str:
    """Where a content is stored: objects/ab/cdef...[.x] (a string: the per-file loops)."""
    name = digest[2:] + (".x" if executable else "")
    return os.path.join(str(store), "objects", digest[:2], name)


def _object(store: Path, e: Entry) -> str:
    return object_file(store, e.digest, e.executable)


def add_object(store: Path, root: Path, e: Entry) -> bool:
    """Copy one file's content into the store unless it is there; True if it was added."""
    target = _object(store, e)
    if os.path.exists(target):
        return False
    os.makedirs(os.path.dirname(target), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".tmp-")
    os.close(fd)
    shutil.copyfile(os.path.join(str(root), e.path), tmp)
    # A copy that changed under us must not enter the store under the old name.
    if file_digest(Path(tmp)) != e.digest:
        os.unlink(tmp)
        raise SnapshotError(f"{e.path} changed while it was being snapshotted",
                            "submit again once the file is saved")
    os.chmod(tmp, 0o555 if e.executable else 0o444)
    os.replace(tmp, target)
    return True


def manifest_text(entries: list[Entry]) -> str:
    rows = sorted(entries, key=lambda e: e.path)
    return json.dumps({
        "format": FORMAT,
        "files": [[e.path, e.digest, int(e.executable), e.size] for e in rows if e.link is None],
        "links": [[e.path, e.link] for e in rows if e.link is not None],
    }, separators=(",", ":"), sort_keys=True)


def build_tree(store: Path, snap_id: str, entries: list[Entry]) -> None:
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
        remove_tree(Path(tmp))
        return
    # Read-only, so that a job cannot change the code the next job of this snapshot runs.
    for d in reversed(dirs):
        os.chmod(os.path.join(str(final), d), 0o555)
    os.chmod(final, 0o555)


def remove_tree(path: Path) -> None:
    """Remove a tree whose directories were made read-only."""
    for top, dirs, _files in os.walk(path):
        os.chmod(top, 0o755)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
    shutil.rmtree(path)


def manifest_of(store: Path, snap_id: str) -> dict[str, object]:
    """A snapshot's manifest: {"files": [[path, digest, exec, size]], "links": [[path, to]]}."""
    data: dict[str, object] = json.loads((store / "manifests" / f"{snap_id}.json").read_text())
    return data


def object_path(store: Path, digest: str, executable: bool) -> Path:
    return Path(object_file(store, digest, executable))


def snapshot_ids(store: Path) -> list[str]:
    """Every snapshot the store holds (by its manifest)."""
    return sorted(p.stem for p in (store / "manifests").glob("*.json"))
