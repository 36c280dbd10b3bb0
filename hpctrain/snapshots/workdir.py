"""A job's working directory (`<run dir>/code`): links into its snapshot's tree, and live links
for what the snapshot leaves out. Standard library only: a login runs it (snapshots/spec.py)."""

from __future__ import annotations

import os
from pathlib import Path

from hpctrain.snapshots.listing import under
from hpctrain.snapshots.model import Snapshot


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
        if (name not in frozen and name != ".git" and not under(name, keep_out)
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
