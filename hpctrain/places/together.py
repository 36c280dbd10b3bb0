"""Files of one place read together: over a login one round trip for all of them (a sweep's
thousands of points included), not one a file."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hpctrain.places import Place

Read = Callable[[Path], "bytes | None"]


@contextmanager
def reading(place: Place, paths: Sequence[Path]) -> Iterator[Read]:
    """For a `with` block, what reads each of `paths` (absolute, at the place) as it was when
    the block began (None: missing); another path is read from the place when asked."""
    try:
        folder = Path(os.path.commonpath([str(p.parent) for p in paths]))
    except ValueError:  # none, or relative beside absolute: each is read when asked
        yield lambda path: _at(place, path)
        return
    with place.readable(folder, [str(p.relative_to(folder)) for p in paths]) as readable:
        wanted = set(paths)

        def read(path: Path) -> bytes | None:
            if path not in wanted:
                return _at(place, path)
            try:
                return (readable / path.relative_to(folder)).read_bytes()
            except OSError:
                return None

        yield read


def _at(place: Place, path: Path) -> bytes | None:
    found = place.read_file(path, None)
    return found[0] if found else None
