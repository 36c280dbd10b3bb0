"""Collecting what no job needs: the snapshots not kept, then every object no kept snapshot
names. Standard library only: a login runs it (snapshots/spec.py)."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from hpctrain.snapshots.objects import manifest_of, object_file, remove_tree, snapshot_ids

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
        needed |= {object_file(store, f[1], bool(f[2]))
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
                remove_tree(store / "trees" / i)
            (store / "manifests" / f"{i}.json").unlink()
        if objects:
            # Its digests may name removed objects: rebuilt by the next freeze.
            shutil.rmtree(store / "index", ignore_errors=True)
    return Collected(str(store), tuple(drop), objects, freed, len(kept))
