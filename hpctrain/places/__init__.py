"""Where a submission goes: this machine (LocalPlace) or a login over ssh (LoginPlace).

Every difference between submitting here and through a login lives in the two classes;
jobs/ and slurm/ ask the place, never whether it is local.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpctrain.places.base import GitState, Place, git_state
from hpctrain.places.local import LocalPlace

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord, StudyRecord
    from hpctrain.profiles.model import Profile

__all__ = ["GitState", "LocalPlace", "Place", "for_profile", "for_record", "for_study",
           "git_state"]


def for_profile(profile: Profile, login: str | None, python_choice: str | None = None,
                local: Place | None = None) -> Place:
    """The profile's login (its host replaced by --login DEST), or this machine (`local`)."""
    from hpctrain.remote.site import profile_connection

    conn = profile_connection(profile, login)
    if conn is None:
        return local or LocalPlace()
    from hpctrain.places.login import LoginPlace

    return LoginPlace(conn, profile.login, python_choice)


def for_record(record: JobRecord, local: Place, login: str | None = None) -> Place:
    """The place a job was submitted through (`login` replaces its destination)."""
    from hpctrain.remote.site import record_connection

    conn = record_connection(record, login)
    if conn is None:
        return local
    from hpctrain.places.login import LoginPlace

    return LoginPlace(conn)


def for_study(study: StudyRecord, history: History, local: Place) -> Place:
    """The place a scaling study's runs were submitted through (its first recorded run's)."""
    ids = [str(r["job_id"]) for r in study.runs if r.get("job_id")]
    records = history.by_job_ids(ids)
    return for_record(records[0], local) if records else local
