"""Where a submission goes: this machine (LocalPlace) or a login over ssh (LoginPlace).

The only door to anything at a job's place: its SLURM, its files and logs, its code
snapshots, its project. Every difference between here and a login lives in the place
classes, and what others must know of it is a fact the place states (places/base.py: Facts);
which place a profile or a recorded job goes through is decided once, in places/choose.py.
"""

from __future__ import annotations

from hpctrain.places.base import GitState, Place, git_state
from hpctrain.places.choose import (
    PLACES,
    PlaceKey,
    by_place,
    elsewhere,
    for_study,
    grouped,
    place_for,
    submitted_through,
)
from hpctrain.places.local import LocalPlace

__all__ = ["PLACES", "GitState", "LocalPlace", "Place", "PlaceKey", "by_place", "elsewhere",
           "for_study", "git_state", "grouped", "place_for", "submitted_through"]
