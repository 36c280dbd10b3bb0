"""Which files a snapshot takes (git's list, else a walk), and what a submit refuses before
writing anything: in-place paths outside the project, a project too large. Standard library
only."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from hpctrain.snapshots.index import git_out, git_view, known
from hpctrain.snapshots.model import Entry, Limits, Listing, MiB, SnapshotError

# Outside git: directories never frozen (hidden ones, caches, virtual environments).
SKIPPED_DIRS = frozenset({"__pycache__", "node_modules"})


def project_files(root: Path, left_out: tuple[str, ...] = ()) -> list[str] | None:
    """Files git tracks under `root`, plus untracked ones it does not ignore, less the
    `left_out` paths; None outside git."""
    out = git_out(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard",
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
            elif not (d.startswith(".") or d in SKIPPED_DIRS or under(prefix + d, skip)
                      or (here / d / "pyvenv.cfg").exists()):
                keep.append(d)
        dirs[:] = sorted(keep)
        found += [prefix + f for f in files]
    return sorted(found)


def under(path: str, prefixes: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in prefixes)


def list_files(root: Path, keep_out: tuple[str, ...], in_place: tuple[str, ...],
               names: list[str] | None = None) -> Listing:
    """The files to freeze, each with its stat: `names`, else git's list, else a walk."""
    left_out = keep_out + in_place
    source = "list"
    if names is None:
        names, source = project_files(root, left_out), "git"
    if names is None:
        names, source = walked_files(root, left_out), "walk"
    out = Listing(source=source)
    top = str(root) + "/"
    exact, below = set(left_out), tuple(p + "/" for p in left_out)
    lstat, is_link, is_file = os.lstat, stat.S_ISLNK, stat.S_ISREG
    for name in names:
        if name in exact or (below and name.startswith(below)):
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
        check_in_place(root, in_place)
    state = (view or git_view)(root, keep_out + in_place) if store is not None else None
    frozen = known(store, root, state) if store is not None and state else None
    if frozen is not None:
        return Listing(source="git", state=state, known=frozen)
    listing = list_files(root, keep_out, in_place)
    listing.state = state
    check_limits(listing, limits)
    return listing


def check_in_place(root: Path, in_place: tuple[str, ...]) -> None:
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


def check_limits(listing: Listing, limits: Limits) -> None:
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
