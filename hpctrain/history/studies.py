"""The studies table: a scaling study's runs, or a sweep's arrays (its points are jobs)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hpctrain.errors import HistoryError
from hpctrain.history.database import Database, utc_now


@dataclass(frozen=True, kw_only=True)
class StudyRecord:
    """A study: `scale`'s runs are dicts (topology, nodes, gpus_per_node, job_id, ...); a
    sweep's are its arrays (job_id, offset, size), its points are jobs with this `id`."""

    name: str
    profile: str
    mode: str
    directory: str
    runs: list[dict[str, Any]]
    created_at: str = field(default_factory=utc_now)
    id: int | None = None
    # "scale" or "sweep".
    kind: str = "scale"


class StudiesTable:
    """The history's studies (`hpctrain scale`, `hpctrain sweep`)."""

    _db: Database

    def add_study(self, study: StudyRecord) -> StudyRecord:
        """Record a scaling study and its runs; a study's name is unique."""
        with self._db.writing() as conn:
            try:
                cur = conn.execute(
                    "INSERT INTO studies (name, created_at, profile, mode, directory, runs, "
                    "kind) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (study.name, study.created_at, study.profile, study.mode, study.directory,
                     json.dumps(study.runs), study.kind),
                )
            except sqlite3.IntegrityError:
                raise HistoryError(f"a study named {study.name!r} exists already",
                                   "choose another --name") from None
        return StudyRecord(**{**study.__dict__, "id": int(cur.lastrowid or 0)})

    def update_study_runs(self, study_id: int, runs: list[dict[str, Any]]) -> None:
        """Store a study's runs again (a sequential study submits them one by one)."""
        with self._db.writing() as conn:
            conn.execute("UPDATE studies SET runs = ? WHERE id = ?", (json.dumps(runs), study_id))

    def delete_study(self, study_id: int) -> None:
        """Forget a study whose submission failed before anything was queued."""
        with self._db.writing() as conn:
            conn.execute("DELETE FROM studies WHERE id = ?", (study_id,))

    def studies(self) -> list[StudyRecord]:
        """Every scaling study, oldest first."""
        return self._studies("", ())

    def study(self, name: str) -> StudyRecord | None:
        """The study with this name (or this numeric id), or None."""
        found = self._studies("WHERE name = ?", (name,))
        if not found and name.isdigit():
            found = self._studies("WHERE id = ?", (int(name),))
        return found[0] if found else None

    def _studies(self, where: str, params: Sequence[object]) -> list[StudyRecord]:
        if not self._db.exists():
            return []
        rows = self._db.rows(
            "SELECT id, name, created_at, profile, mode, directory, runs, kind FROM studies "
            f"{where} ORDER BY id", params)
        return [StudyRecord(id=r[0], name=r[1], created_at=r[2], profile=r[3], mode=r[4],
                            directory=r[5], runs=json.loads(r[6]), kind=r[7]) for r in rows]
