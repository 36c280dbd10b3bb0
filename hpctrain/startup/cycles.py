"""Python's search for reference cycles, paused where a process makes many objects at once
and frees few: the CLI's render and submit, the trainer's imports of torch and Lightning."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def without_cycle_search(freeze: bool = False) -> Iterator[None]:
    """The search off inside, as it was after; `freeze`: what was made by then is left out of
    every later search (gc.freeze)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was_on:
            gc.enable()
