"""Freezing a project into the store, and finding a snapshot it already holds (a rerun).
Standard library only: a login runs it (snapshots/spec.py)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace
from pathlib import Path

from hpctrain.snapshots.index import hash_all, remember
from hpctrain.snapshots.listing import check_in_place, check_limits, list_files
from hpctrain.snapshots.model import Limits, Listing, Snapshot, SnapshotError
from hpctrain.snapshots.objects import (
    add_object,
    build_tree,
    manifest_of,
    manifest_text,
    write_atomic,
)


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
        check_in_place(root, in_place)
        listing = list_files(root, keep_out, in_place, names)
        check_limits(listing, limits)
    entries = listing.entries
    hash_all(root, store, entries)
    manifest = manifest_text(entries)
    snap_id = hashlib.sha256(manifest.encode()).hexdigest()[:20]
    # The tree exists: this very snapshot was stored whole before (gc keeps a kept tree's
    # objects), so there is nothing to store.
    done = (store / "trees" / snap_id).exists()
    added = [] if done else [e for e in entries if e.link is None and
                             add_object(store, root, e)]
    manifest_file = store / "manifests" / f"{snap_id}.json"
    if not done and not manifest_file.exists():
        write_atomic(manifest_file, manifest + "\n")
    if not done:
        build_tree(store, snap_id, entries)
    files = [e for e in entries if e.link is None]
    snap = Snapshot(
        id=snap_id, files=len(files), bytes=sum(e.size for e in files),
        added_files=len(added), added_bytes=sum(e.size for e in added),
        source=listing.source, store=str(store), in_place=tuple(in_place))
    if listing.state is not None:
        remember(store, root, listing.state, snap)
    return snap


def existing_snapshot(store: Path, snap_id: str, in_place: tuple[str, ...] = ()) -> Snapshot:
    """A snapshot the store holds, to run again; SnapshotError once gc has removed it."""
    if not snap_id or not (store / "trees" / snap_id).is_dir():
        raise SnapshotError(f"snapshot {snap_id} is no longer in {store} (hpctrain gc removed "
                            "it, or the store moved)", "submit the job again from the project")
    files: list[list[object]] = manifest_of(store, snap_id)["files"]  # type: ignore[assignment]
    return Snapshot(id=snap_id, files=len(files), bytes=sum(int(str(f[3])) for f in files),
                    added_files=0, added_bytes=0, source="rerun", store=str(store),
                    in_place=in_place)
