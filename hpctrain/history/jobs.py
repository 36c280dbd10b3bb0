"""The jobs table: one row per submitted job, and what SLURM last said of it.

No environment values are ever stored here: secrets reach jobs through sbatch's --export=ALL.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from hpctrain.history.database import Database, utc_now


@dataclass(frozen=True, kw_only=True)
class JobFacts:
    """What submit knows of a job: a new row and a stored one both carry it."""

    job_id: str
    cluster: str
    profile: str
    job_name: str
    partition: str | None
    nodes: int
    gpus_per_node: int
    total_gpus: int
    command: Sequence[str]
    run_dir: str | None
    script_path: str | None
    stdout_path: str | None
    stderr_path: str | None
    workdir: str
    git_commit: str | None
    git_dirty: bool | None
    time_limit_s: int | None = None
    # In a chain: the first job's id, this job's place (1-based) and the chain's length.
    chain_head: str | None = None
    segment: int | None = None
    segments: int | None = None
    # Submitted over ssh (`login:`/--login): the destination and its ssh config file.
    login: str | None = None
    login_config: str | None = None
    # Racing alternatives (--first-of): the first alternative's id, all of them as "1x4,4x1".
    race_head: str | None = None
    race_of: str | None = None
    # The code snapshot the job runs (hpctrain/snapshots/); None: it runs in `workdir`.
    snapshot: str | None = None
    # A study's job: a sweep's point (one task of its array) or a scaling study's run.
    study: int | None = None


@dataclass(frozen=True, kw_only=True)
class NewJob(JobFacts):
    """A job just accepted by sbatch, as submit records it."""

    submitted_at: str = field(default_factory=utc_now)


@dataclass(frozen=True, kw_only=True)
class JobRecord(JobFacts):
    """One row of the history: the facts, and what SLURM last said."""

    id: int
    command: list[str]
    submitted_at: str
    state: str
    slurm_state: str | None
    exit_code: int | None
    signal: int | None
    reason: str | None
    node_list: str | None
    elapsed_s: int | None
    updated_at: str | None
    terminal: bool
    stale: bool
    verdict: str | None = None
    # A --first-of alternative: "JOBID NODESxGPUS" of the one that claimed the run, once
    # learned (tracking/races.py); None: not yet.
    race_winner: str | None = None

    @property
    def unjudged(self) -> bool:
        """Ended without its verdict yet (`status` makes it once: tracking/why.py)."""
        return self.terminal and self.verdict is None


@dataclass(frozen=True)
class StateUpdate:
    """What a refresh learned about one job (by history row id)."""

    id: int
    state: str
    terminal: bool
    stale: bool
    slurm_state: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    node_list: str | None = None
    elapsed_s: int | None = None
    time_limit_s: int | None = None


_COLUMNS = tuple(f.name for f in fields(JobRecord))
# Named, not `*`: later migrations may add columns in any order.
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM jobs"


_INSERT = """
INSERT INTO jobs (job_id, cluster, profile, job_name, partition, nodes, gpus_per_node,
    total_gpus, command, run_dir, script_path, stdout_path, stderr_path, submitted_at, workdir,
    git_commit, git_dirty, state, time_limit_s, updated_at, chain_head, segment, segments,
    login, login_config, race_head, race_of, snapshot, study)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'PENDING', ?, ?, ?, ?, ?, ?, ?, ?, ?,
        ?, ?)
ON CONFLICT (cluster, job_id) DO UPDATE SET
    profile = excluded.profile, job_name = excluded.job_name,
    partition = excluded.partition, nodes = excluded.nodes,
    gpus_per_node = excluded.gpus_per_node, total_gpus = excluded.total_gpus,
    command = excluded.command, run_dir = excluded.run_dir,
    script_path = excluded.script_path, stdout_path = excluded.stdout_path,
    stderr_path = excluded.stderr_path, submitted_at = excluded.submitted_at,
    workdir = excluded.workdir, git_commit = excluded.git_commit,
    git_dirty = excluded.git_dirty, state = 'PENDING', slurm_state = NULL, exit_code = NULL,
    signal = NULL, reason = NULL, node_list = NULL, elapsed_s = NULL,
    time_limit_s = excluded.time_limit_s, updated_at = excluded.updated_at, terminal = 0,
    stale = 0, chain_head = excluded.chain_head, segment = excluded.segment,
    segments = excluded.segments, login = excluded.login,
    login_config = excluded.login_config, race_head = excluded.race_head,
    race_of = excluded.race_of, snapshot = excluded.snapshot, verdict = NULL,
    study = excluded.study, race_winner = NULL
"""


def _insert_values(job: NewJob) -> tuple[object, ...]:
    return (
        job.job_id, job.cluster, job.profile, job.job_name, job.partition, job.nodes,
        job.gpus_per_node, job.total_gpus, json.dumps(list(job.command)), job.run_dir,
        job.script_path, job.stdout_path, job.stderr_path, job.submitted_at, job.workdir,
        job.git_commit, None if job.git_dirty is None else int(job.git_dirty),
        job.time_limit_s, utc_now(), job.chain_head, job.segment, job.segments, job.login,
        job.login_config, job.race_head, job.race_of, job.snapshot, job.study,
    )


def _record(row: tuple[object, ...]) -> JobRecord:
    data: dict[str, Any] = dict(zip(_COLUMNS, tuple(row), strict=True))
    data["command"] = json.loads(str(data["command"]))
    data["git_dirty"] = None if data["git_dirty"] is None else bool(data["git_dirty"])
    data["terminal"] = bool(data["terminal"])
    data["stale"] = bool(data["stale"])
    return JobRecord(**data)


class JobsTable:
    """The history's jobs: recording submissions and refreshes, and the reads over them."""

    _db: Database

    def add(self, job: NewJob) -> JobRecord:
        """Record a submitted job; the row starts PENDING."""
        return self.add_all([job])[0]

    def add_all(self, jobs: Sequence[NewJob]) -> list[JobRecord]:
        """Record submitted jobs in one transaction (a sweep's thousands of points); each row
        starts PENDING. A dev cluster rebuilt from scratch reuses job ids: the new job
        replaces the old."""
        with self._db.writing() as conn:
            conn.executemany(_INSERT, [_insert_values(job) for job in jobs])
            rows = [conn.execute(f"{_SELECT} WHERE cluster = ? AND job_id = ?",
                                 (job.cluster, job.job_id)).fetchone() for job in jobs]
        return [_record(row) for row in rows]

    def add_attempt(self, record: JobRecord, job_id: str, stdout: str | None,
                    stderr: str | None) -> JobRecord:
        """Record `job_id` as the next attempt of `record`'s job (a retry after a fault): the
        two become a chain, shown as one job."""
        head, segment = record.chain_head or record.job_id, record.segment or 1
        facts = {f.name: getattr(record, f.name) for f in fields(JobFacts)}
        with self._db.writing() as conn:
            conn.execute("UPDATE jobs SET chain_head = ?, segment = ?, segments = ? "
                         "WHERE cluster = ? AND chain_head IS ? AND job_id = ?",
                         (head, segment, segment + 1, record.cluster, record.chain_head,
                          record.job_id))
            conn.execute("UPDATE jobs SET segments = ? WHERE cluster = ? AND "
                         "chain_head = ?", (segment + 1, record.cluster, head))
        return self.add(NewJob(**{**facts, "job_id": job_id, "chain_head": head,
                                  "segment": segment + 1, "segments": segment + 1,
                                  "stdout_path": stdout, "stderr_path": stderr}))

    def set_study(self, row_ids: Sequence[int], study_id: int) -> None:
        """Make jobs (a scaling study's runs, submitted one by one) members of a study."""
        with self._db.writing() as conn:
            conn.executemany("UPDATE jobs SET study = ? WHERE id = ?",
                             [(study_id, i) for i in row_ids])

    def set_verdicts(self, verdicts: Iterable[tuple[int, str]]) -> None:
        """Store (row id, verdict) pairs of ended jobs; a verdict once made is kept."""
        rows = [(text, row_id) for row_id, text in verdicts]
        if not rows:
            return
        with self._db.writing() as conn:
            conn.executemany("UPDATE jobs SET verdict = ? WHERE id = ? AND terminal = 1 "
                             "AND verdict IS NULL", rows)

    def update(self, updates: Iterable[StateUpdate]) -> int:
        """Store what a refresh learned, in one transaction; return the rows changed."""
        rows = [
            (u.state, u.slurm_state, u.exit_code, u.signal, u.reason, u.node_list, u.elapsed_s,
             u.time_limit_s, int(u.terminal), int(u.stale), utc_now(), u.id)
            for u in updates
        ]
        if not rows:
            return 0
        with self._db.writing() as conn:
            # A terminal row is never overwritten: a late, older answer must not revive it.
            cur = conn.executemany(
                """
                UPDATE jobs SET state = ?, slurm_state = ?, exit_code = ?, signal = ?,
                    reason = ?, node_list = ?, elapsed_s = ?,
                    time_limit_s = COALESCE(?, time_limit_s), terminal = ?, stale = ?,
                    updated_at = ?
                WHERE id = ? AND terminal = 0
                """,
                rows,
            )
        return cur.rowcount

    def all(self) -> list[JobRecord]:
        """Every job, oldest first."""
        return self._select()

    def recent(self, last: int = 20) -> list[JobRecord]:
        """Every unfinished job plus the `last` most recently submitted, oldest first."""
        return self._select(
            "WHERE terminal = 0 OR id IN (SELECT id FROM jobs ORDER BY id DESC LIMIT ?)",
            (last,),
        )

    def unfinished(self) -> list[JobRecord]:
        return self._select("WHERE terminal = 0")

    def by_job_ids(self, job_ids: Sequence[str]) -> list[JobRecord]:
        """Rows with these SLURM job ids (on any cluster), oldest first."""
        if not job_ids:
            return []
        marks = ",".join("?" * len(job_ids))
        return self._select(f"WHERE job_id IN ({marks})", list(job_ids))

    def chain(self, cluster: str, head: str) -> list[JobRecord]:
        """Every job of the chain that `head` started, in segment order."""
        return self._select("WHERE cluster = ? AND chain_head = ?", (cluster, head),
                            "ORDER BY segment")

    def study_jobs(self, study_id: int) -> list[JobRecord]:
        """A sweep's points, in point order (their run directories sort as the points)."""
        return self._select("WHERE study = ?", (study_id,), "ORDER BY run_dir, id")

    def set_race_winner(self, cluster: str, head: str, winner: str) -> None:
        """Record who claimed the run of the race `head` started, on each of its alternatives."""
        with self._db.writing() as conn:
            conn.execute("UPDATE jobs SET race_winner = ? WHERE cluster = ? AND race_head = ?",
                         (winner, cluster, head))

    def race(self, cluster: str, head: str) -> list[JobRecord]:
        """Every alternative of the run that `head` (its first alternative) started."""
        return self._select("WHERE cluster = ? AND race_head = ?", (cluster, head))

    def by_row_ids(self, ids: Sequence[int]) -> list[JobRecord]:
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        return self._select(f"WHERE id IN ({marks})", list(ids))

    def last(self) -> JobRecord | None:
        """The job submitted last."""
        rows = self._select(tail="ORDER BY id DESC LIMIT 1")
        return rows[0] if rows else None

    def count(self) -> int:
        if not self._db.exists():
            return 0
        return int(self._db.rows("SELECT COUNT(*) FROM jobs")[0][0])

    def _select(self, where: str = "", params: Sequence[object] = (), tail: str = "ORDER BY id"
                ) -> list[JobRecord]:
        if not self._db.exists():
            return []
        return [_record(r) for r in self._db.rows(f"{_SELECT} {where} {tail}", params)]
