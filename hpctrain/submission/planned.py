"""The one shape of every kind's dry run: the scripts it would queue, the run directories and
files it would write, the project it would freeze. The pipeline checks and the dry run shows
any kind through it alone."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from hpctrain.plan import JobPlan
    from hpctrain.snapshots.spec import CodeSpec
    from hpctrain.values.rundir import RunFile

T = TypeVar("T", bound="Planned")


@dataclass(frozen=True)
class Script:
    """One script a submission would queue: what tells it from its siblings, where, its text."""

    label: str
    # None: a preview (`render`), which has no run directory.
    path: Path | None
    text: str
    plan: JobPlan

    def as_dict(self) -> dict[str, object]:
        return {"label": self.label, "path": str(self.path) if self.path else None,
                "text": self.text}


@dataclass(frozen=True)
class RunDirPlan:
    """A run directory a submission would make, with every file it would write there."""

    path: Path
    files: tuple[RunFile, ...]


def image_paths(scripts: Iterable[Script]) -> tuple[str, ...]:
    """The container images given as paths that `scripts`' ranks start in, each once (a
    pyxis name or a docker:// URI is the runtime's to fetch, not a path to check)."""
    boxes = (s.plan.container for s in scripts)
    return tuple(dict.fromkeys(b.image for b in boxes if b is not None and b.image_is_path))


class Planned(Protocol):
    """Everything a kind's submission would write and queue, decided as a value."""

    def scripts(self) -> tuple[Script, ...]:
        """The scripts in the order they would be queued."""
        ...

    def run_dirs(self) -> tuple[RunDirPlan, ...]:
        """The run directories with their files (checked at the place before the dry run)."""
        ...

    def frozen_code(self) -> CodeSpec | None:
        """The project as this submission would freeze it (None: nothing is frozen)."""
        ...

    def needed_paths(self) -> tuple[str, ...]:
        """Paths at the place the jobs read as they start (their container images): submit
        refuses, before anything is written or queued, where one is missing (not the dry run)."""
        ...

    def with_listing(self: T, checked: CodeSpec) -> T:
        """The same, with the project's files as the place's check listed them."""
        ...

    def as_dict(self) -> dict[str, object]:
        """The dry run for --json (the scripts' text is added by the display)."""
        ...
