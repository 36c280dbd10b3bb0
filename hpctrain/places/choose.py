"""Which place a profile or a recorded job goes through: the one table of places.

A new place is one class (the groups of places/base.py: Place, and `for_profile`,
`for_record`) and one line in PLACES; nothing outside places/ asks which place it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from hpctrain.places.login import LoginPlace

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord, StudyRecord
    from hpctrain.places.base import Place
    from hpctrain.profiles.model import Profile


class Chooses(Protocol):
    """A place class as the table sees it: whether a profile or a recorded job is its."""

    def for_profile(self, profile: Profile, login: str | None, python_choice: str | None
                    ) -> Place | None: ...

    def for_record(self, record: JobRecord, login: str | None) -> Place | None: ...


# Asked in order; the first that claims a profile or a record is its place. None claims a
# profile without a login, or a job submitted here: this machine (the `local` handed in).
PLACES: tuple[Chooses, ...] = (LoginPlace,)

# The history's columns that say where a job was submitted through: (None, None) is here.
PlaceKey = tuple[str | None, str | None]


def place_for(of: Profile | JobRecord, local: Place, login: str | None = None,
              python_choice: str | None = None) -> Place:
    """The place of a profile (its login, or --login DEST) or of a recorded job (the one it
    was submitted through; `login`: another destination for it); else this machine."""
    # Asked of the record, not the profile: the history is loaded wherever records are, where
    # the profiles' models would be imported for this test alone (status of ended jobs).
    from hpctrain.history import JobRecord

    for kind in PLACES:
        found = (kind.for_record(of, login) if isinstance(of, JobRecord)
                 else kind.for_profile(of, login, python_choice))
        if found is not None:
            return found
    return local


def elsewhere(profiles: Sequence[Profile]) -> list[Profile]:
    """The profiles a place other than this machine claims (their login): what `free` looks
    at when it is given none."""
    return [p for p in profiles
            if any(kind.for_profile(p, None, None) is not None for kind in PLACES)]


def for_study(study: StudyRecord, history: History, local: Place) -> Place:
    """The place a scaling study's runs were submitted through (its first recorded run's)."""
    ids = [str(r["job_id"]) for r in study.runs if r.get("job_id")]
    records = history.by_job_ids(ids)
    return place_for(records[0], local) if records else local


def key(record: JobRecord) -> PlaceKey:
    """Where the job was submitted through, as the history records it."""
    return record.login or None, record.login_config if record.login else None


def grouped(records: Sequence[JobRecord], login: str | None = None
            ) -> dict[PlaceKey, list[JobRecord]]:
    """The records grouped by the place they went through (a login given: only its jobs)."""
    groups: dict[PlaceKey, list[JobRecord]] = {}
    for r in records:
        if login is None or r.login == login:
            groups.setdefault(key(r), []).append(r)
    return groups


def by_place(records: Sequence[JobRecord], local: Place, login: str | None = None
             ) -> list[tuple[Place, list[JobRecord]]]:
    """Each place the records went through, with its records (one place per group)."""
    return [(place_for(group[0], local), group) for group in grouped(records, login).values()]


def submitted_through(records: Sequence[JobRecord], login: str | None) -> list[JobRecord]:
    """The records of jobs submitted through `login` (None: from this machine)."""
    return [r for r in records if key(r)[0] == login]
