"""The store's values and bounds: a snapshot, a project's files as a freeze lists them, the
limits on a project's size, and the error that refuses one (standard library only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

FORMAT = 1
MiB = 1024 * 1024
# Data belongs outside a snapshot: past these a submit is refused with the largest files named.
MAX_FILE_BYTES = 20 * MiB
MAX_TOTAL_BYTES = 512 * MiB
MAX_FILES = 100_000


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
