"""The job history: SQLite, a module per table, behind one facade (the only package using
sqlite3).

`database` opens the file and migrates it; `jobs`, `studies` and `suspects` each hold one
table's rows and queries; `History` is all of them on one file, as callers use it.
"""

from __future__ import annotations

from pathlib import Path

from hpctrain.files import paths
from hpctrain.history.database import BUSY_TIMEOUT_S, MIGRATIONS, Database
from hpctrain.history.jobs import JobFacts, JobRecord, JobsTable, NewJob, StateUpdate
from hpctrain.history.studies import StudiesTable, StudyRecord
from hpctrain.history.suspects import NodeSuspect, SuspectsTable

__all__ = [
    "MIGRATIONS", "History", "JobFacts", "JobRecord", "NewJob", "NodeSuspect", "StateUpdate",
    "StudyRecord",
]


class History(JobsTable, StudiesTable, SuspectsTable):
    """The job history at `path` (default: paths.history_db()); opened lazily."""

    def __init__(self, path: Path | None = None, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self._db = Database(Path(path) if path is not None else paths.history_db(),
                            busy_timeout_s)

    @property
    def path(self) -> Path:
        return self._db.path

    def exists(self) -> bool:
        return self._db.exists()

    def close(self) -> None:
        self._db.close()

    def schema_version(self) -> int:
        return self._db.schema_version()
