"""The job history: SQLite with ordered, recorded migrations (the only module using sqlite3).

Concurrency: WAL mode and a busy timeout, and every write in a `BEGIN IMMEDIATE` transaction,
so that many `hpctrain submit` processes started at once all get their row in.
No environment values are ever stored here: secrets reach jobs through sbatch's --export=ALL.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hpctrain.errors import HistoryError
from hpctrain.files import paths

BUSY_TIMEOUT_S = 30.0

# Append only: never edit a migration that has shipped; add a new one.
MIGRATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "0001_jobs",
        (
            """
            CREATE TABLE jobs (
                id            INTEGER PRIMARY KEY AUTOINCREMENT,
                job_id        TEXT    NOT NULL,
                cluster       TEXT    NOT NULL,
                profile       TEXT    NOT NULL,
                job_name      TEXT    NOT NULL,
                partition     TEXT,
                nodes         INTEGER NOT NULL,
                gpus_per_node INTEGER NOT NULL,
                total_gpus    INTEGER NOT NULL,
                command       TEXT    NOT NULL,
                run_dir       TEXT,
                script_path   TEXT,
                stdout_path   TEXT,
                stderr_path   TEXT,
                submitted_at  TEXT    NOT NULL,
                workdir       TEXT    NOT NULL,
                git_commit    TEXT,
                git_dirty     INTEGER,
                state         TEXT    NOT NULL DEFAULT 'PENDING',
                slurm_state   TEXT,
                exit_code     INTEGER,
                signal        INTEGER,
                reason        TEXT,
                node_list     TEXT,
                elapsed_s     INTEGER,
                time_limit_s  INTEGER,
                updated_at    TEXT,
                terminal      INTEGER NOT NULL DEFAULT 0,
                stale         INTEGER NOT NULL DEFAULT 0,
                UNIQUE (cluster, job_id)
            )
            """,
            "CREATE INDEX jobs_unfinished ON jobs (terminal, cluster)",
            "CREATE INDEX jobs_job_id ON jobs (job_id)",
        ),
    ),
    (
        # `submit --chain N`: N jobs, one run; each row names the chain's first job id.
        "0002_chains",
        (
            "ALTER TABLE jobs ADD COLUMN chain_head TEXT",
            "ALTER TABLE jobs ADD COLUMN segment INTEGER",
            "ALTER TABLE jobs ADD COLUMN segments INTEGER",
            "CREATE INDEX jobs_chain ON jobs (cluster, chain_head)",
        ),
    ),
    (
        # `hpctrain scale`: one study, its runs (topology, job id, run dir) as a JSON list.
        "0003_studies",
        (
            """
            CREATE TABLE studies (
                id          INTEGER PRIMARY KEY AUTOINCREMENT,
                name        TEXT    NOT NULL UNIQUE,
                created_at  TEXT    NOT NULL,
                profile     TEXT    NOT NULL,
                mode        TEXT    NOT NULL,
                directory   TEXT    NOT NULL,
                runs        TEXT    NOT NULL
            )
            """,
        ),
    ),
    (
        # Jobs submitted from a laptop: the ssh destination and config they went through.
        "0004_logins",
        (
            "ALTER TABLE jobs ADD COLUMN login TEXT",
            "ALTER TABLE jobs ADD COLUMN login_config TEXT",
        ),
    ),
    (
        # `submit --first-of 1x4,4x1`: one run raced as alternatives; each row names the
        # first alternative's job id and every alternative's NODESxGPUS.
        "0005_alternatives",
        (
            "ALTER TABLE jobs ADD COLUMN race_head TEXT",
            "ALTER TABLE jobs ADD COLUMN race_of TEXT",
            "CREATE INDEX jobs_race ON jobs (cluster, race_head)",
        ),
    ),
    (
        # Code snapshots: the id of the snapshot the job runs (NULL: --no-snapshot, or a job
        # submitted before snapshots).
        "0006_snapshots",
        ("ALTER TABLE jobs ADD COLUMN snapshot TEXT",),
    ),
    (
        # `hpctrain why`'s one-line verdict of an ended job, made once when status first sees
        # it ended ('' when nothing went wrong; NULL: not made yet).
        "0007_verdicts",
        ("ALTER TABLE jobs ADD COLUMN verdict TEXT",),
    ),
    (
        # `hpctrain sweep`: each point is a job (an array task, id "ARRAY_TASK") of a study;
        # a study is a scaling study or a sweep.
        "0008_sweeps",
        (
            "ALTER TABLE jobs ADD COLUMN study INTEGER",
            "CREATE INDEX jobs_study ON jobs (study)",
            "ALTER TABLE studies ADD COLUMN kind TEXT NOT NULL DEFAULT 'scale'",
        ),
    ),
    (
        # Bad nodes remembered (`hpctrain nodes`): evidence that points at one node of a
        # cluster, kept with its time; a suspect is quarantined until it expires or is cleared.
        "0009_node_suspects",
        (
            """
            CREATE TABLE node_suspects (
                id          INTEGER PRIMARY KEY AUTOINCREMENT,
                cluster     TEXT NOT NULL,
                node        TEXT NOT NULL,
                reason      TEXT NOT NULL,
                evidence    TEXT NOT NULL,
                job_id      TEXT,
                at          TEXT NOT NULL,
                cleared_at  TEXT
            )
            """,
            "CREATE INDEX node_suspects_node ON node_suspects (cluster, node)",
        ),
    ),
)

_SCHEMA_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL
)
"""


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
    # The code snapshot the job runs (snapshots/store.py); None: it runs in `workdir`.
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
    study = excluded.study
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


class History:
    """The job history at `path` (default: paths.history_db()); opened lazily."""

    def __init__(self, path: Path | None = None, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = Path(path) if path is not None else paths.history_db()
        self.busy_timeout_s = busy_timeout_s
        self._conn: sqlite3.Connection | None = None

    def exists(self) -> bool:
        return self.path.is_file()

    # --- connection and migrations ---------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE), never implied.
            conn = sqlite3.connect(
                str(self.path), timeout=self.busy_timeout_s, isolation_level=None
            )
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
            # WAL lets readers (status) run while a submit writes. On filesystems without
            # shared memory SQLite keeps its rollback journal, which is slower but correct.
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            self._conn = conn
            self._migrate(conn)
        except sqlite3.Error as e:
            self.close()
            raise self._error("open", e) from None
        except OSError as e:
            raise HistoryError(
                f"cannot create the job history's directory {self.path.parent}: {e.strerror}",
                "set HPCTRAIN_HOME to a writable directory",
            ) from None
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        current = conn.execute("PRAGMA user_version").fetchone()[0]
        if current == len(MIGRATIONS):
            return
        with self._transaction(conn):
            conn.execute(_SCHEMA_MIGRATIONS)
            applied = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            newest = max(applied, default=0)
            if newest > len(MIGRATIONS):
                raise HistoryError(
                    f"the job history {self.path} was written by a newer hpctrain "
                    f"(schema {newest}, this one knows {len(MIGRATIONS)})",
                    "upgrade hpctrain, or point HPCTRAIN_HOME elsewhere",
                )
            # Another process may have migrated while this one waited for the lock.
            for version, (name, statements) in enumerate(MIGRATIONS, start=1):
                if version in applied:
                    continue
                for sql in statements:
                    conn.execute(sql)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (version, name, utc_now()),
                )
            conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[None]:
        # IMMEDIATE takes the write lock up front, so two writers never deadlock upgrading
        # read locks; the busy timeout makes the second one wait instead of failing.
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _error(self, what: str, e: sqlite3.Error) -> HistoryError:
        if "locked" in str(e) or "busy" in str(e):
            return HistoryError(
                f"the job history {self.path} stayed locked for {self.busy_timeout_s:g} s "
                f"({what})",
                "another hpctrain process holds it; retry, or look for a stuck process",
            )
        return HistoryError(
            f"cannot {what} the job history {self.path}: {e}",
            "check the file's permissions and free space; move it aside to start afresh",
        )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def schema_version(self) -> int:
        return int(self._connect().execute("PRAGMA user_version").fetchone()[0])

    # --- writes ------------------------------------------------------------------------------

    def add(self, job: NewJob) -> JobRecord:
        """Record a submitted job; the row starts PENDING."""
        return self.add_all([job])[0]

    def add_all(self, jobs: Sequence[NewJob]) -> list[JobRecord]:
        """Record submitted jobs in one transaction (a sweep's thousands of points); each row
        starts PENDING. A dev cluster rebuilt from scratch reuses job ids: the new job
        replaces the old."""
        conn = self._connect()
        try:
            with self._transaction(conn):
                conn.executemany(_INSERT, [_insert_values(job) for job in jobs])
                rows = [conn.execute(f"{_SELECT} WHERE cluster = ? AND job_id = ?",
                                     (job.cluster, job.job_id)).fetchone() for job in jobs]
        except sqlite3.Error as e:
            raise self._error("write", e) from None
        return [_record(row) for row in rows]

    def set_verdicts(self, verdicts: Iterable[tuple[int, str]]) -> None:
        """Store (row id, verdict) pairs of ended jobs; a verdict once made is kept."""
        rows = [(text, row_id) for row_id, text in verdicts]
        if not rows:
            return
        conn = self._connect()
        try:
            with self._transaction(conn):
                conn.executemany("UPDATE jobs SET verdict = ? WHERE id = ? AND terminal = 1 "
                                 "AND verdict IS NULL", rows)
        except sqlite3.Error as e:
            raise self._error("write", e) from None

    def update(self, updates: Iterable[StateUpdate]) -> int:
        """Store what a refresh learned, in one transaction; return the rows changed."""
        rows = [
            (u.state, u.slurm_state, u.exit_code, u.signal, u.reason, u.node_list, u.elapsed_s,
             u.time_limit_s, int(u.terminal), int(u.stale), utc_now(), u.id)
            for u in updates
        ]
        if not rows:
            return 0
        conn = self._connect()
        try:
            with self._transaction(conn):
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
        except sqlite3.Error as e:
            raise self._error("write", e) from None

    # --- reads -------------------------------------------------------------------------------

    def _select(self, where: str = "", params: Sequence[object] = (), tail: str = "ORDER BY id"
                ) -> list[JobRecord]:
        if not self.exists():
            return []
        conn = self._connect()
        try:
            rows = conn.execute(f"{_SELECT} {where} {tail}", tuple(params)).fetchall()
        except sqlite3.Error as e:
            raise self._error("read", e) from None
        return [_record(r) for r in rows]

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
        if not self.exists():
            return 0
        return int(self._connect().execute("SELECT COUNT(*) FROM jobs").fetchone()[0])

    # --- scaling studies (`hpctrain scale`) ---------------------------------------------------

    def add_study(self, study: StudyRecord) -> StudyRecord:
        """Record a scaling study and its runs; a study's name is unique."""
        conn = self._connect()
        try:
            with self._transaction(conn):
                cur = conn.execute(
                    "INSERT INTO studies (name, created_at, profile, mode, directory, runs, "
                    "kind) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (study.name, study.created_at, study.profile, study.mode, study.directory,
                     json.dumps(study.runs), study.kind),
                )
        except sqlite3.IntegrityError:
            raise HistoryError(f"a study named {study.name!r} exists already",
                               "choose another --name") from None
        except sqlite3.Error as e:
            raise self._error("write", e) from None
        return StudyRecord(**{**study.__dict__, "id": int(cur.lastrowid or 0)})

    def update_study_runs(self, study_id: int, runs: list[dict[str, Any]]) -> None:
        """Store a study's runs again (a sequential study submits them one by one)."""
        conn = self._connect()
        try:
            with self._transaction(conn):
                conn.execute("UPDATE studies SET runs = ? WHERE id = ?",
                             (json.dumps(runs), study_id))
        except sqlite3.Error as e:
            raise self._error("write", e) from None

    def set_study(self, row_ids: Sequence[int], study_id: int) -> None:
        """Make jobs (a scaling study's runs, submitted one by one) members of a study."""
        conn = self._connect()
        try:
            with self._transaction(conn):
                conn.executemany("UPDATE jobs SET study = ? WHERE id = ?",
                                 [(study_id, i) for i in row_ids])
        except sqlite3.Error as e:
            raise self._error("write", e) from None

    def delete_study(self, study_id: int) -> None:
        """Forget a study whose submission failed before anything was queued."""
        conn = self._connect()
        try:
            with self._transaction(conn):
                conn.execute("DELETE FROM studies WHERE id = ?", (study_id,))
        except sqlite3.Error as e:
            raise self._error("write", e) from None

    def studies(self) -> list[StudyRecord]:
        """Every scaling study, oldest first."""
        return self._studies("", ())

    def study(self, name: str) -> StudyRecord | None:
        """The study with this name (or this numeric id), or None."""
        found = self._studies("WHERE name = ?", (name,))
        if not found and name.isdigit():
            found = self._studies("WHERE id = ?", (int(name),))
        return found[0] if found else None

    def add_attempt(self, record: JobRecord, job_id: str, stdout: str | None,
                    stderr: str | None) -> JobRecord:
        """Record `job_id` as the next attempt of `record`'s job (a retry after a fault): the
        two become a chain, shown as one job."""
        head, segment = record.chain_head or record.job_id, record.segment or 1
        facts = {f.name: getattr(record, f.name) for f in fields(JobFacts)}
        conn = self._connect()
        try:
            with self._transaction(conn):
                conn.execute("UPDATE jobs SET chain_head = ?, segment = ?, segments = ? "
                             "WHERE cluster = ? AND chain_head IS ? AND job_id = ?",
                             (head, segment, segment + 1, record.cluster, record.chain_head,
                              record.job_id))
                conn.execute("UPDATE jobs SET segments = ? WHERE cluster = ? AND "
                             "chain_head = ?", (segment + 1, record.cluster, head))
        except sqlite3.Error as e:
            raise self._error("write", e) from None
        return self.add(NewJob(**{**facts, "job_id": job_id, "chain_head": head,
                                  "segment": segment + 1, "segments": segment + 1,
                                  "stdout_path": stdout, "stderr_path": stderr}))

    # --- bad nodes (`hpctrain nodes`) ----------------------------------------------------------

    def add_suspects(self, suspects: Sequence[NodeSuspect]) -> None:
        """Remember evidence against nodes; the same job's evidence against a node once."""
        conn = self._connect()
        try:
            with self._transaction(conn):
                for s in suspects:
                    known = conn.execute(
                        "SELECT 1 FROM node_suspects WHERE cluster = ? AND node = ? AND "
                        "job_id IS ? AND reason = ?", (s.cluster, s.node, s.job_id, s.reason)
                    ).fetchone()
                    if known is None:
                        conn.execute(
                            "INSERT INTO node_suspects (cluster, node, reason, evidence, job_id, "
                            "at) VALUES (?, ?, ?, ?, ?, ?)",
                            (s.cluster, s.node, s.reason, s.evidence, s.job_id, s.at))
        except sqlite3.Error as e:
            raise self._error("write", e) from None

    def suspects(self, cluster: str | None = None) -> list[NodeSuspect]:
        """The evidence not cleared, oldest first (every cluster's without `cluster`)."""
        if not self.exists():
            return []
        where, params = ("AND cluster = ?", (cluster,)) if cluster else ("", ())
        try:
            rows = self._connect().execute(
                "SELECT id, cluster, node, reason, evidence, job_id, at FROM node_suspects "
                f"WHERE cleared_at IS NULL {where} ORDER BY at, id", params).fetchall()
        except sqlite3.Error as e:
            raise self._error("read", e) from None
        return [NodeSuspect(id=r[0], cluster=r[1], node=r[2], reason=r[3], evidence=r[4],
                            job_id=r[5], at=r[6]) for r in rows]

    def clear_suspects(self, cluster: str | None, nodes: Sequence[str] | None) -> int:
        """Clear the evidence against `nodes` (every node without them); how many rows."""
        conn = self._connect()
        clauses = ["cleared_at IS NULL"]
        params: list[object] = [utc_now()]
        if cluster:
            clauses.append("cluster = ?")
            params.append(cluster)
        if nodes is not None:
            clauses.append(f"node IN ({', '.join('?' * len(nodes))})")
            params.extend(nodes)
        try:
            with self._transaction(conn):
                cur = conn.execute(
                    f"UPDATE node_suspects SET cleared_at = ? WHERE {' AND '.join(clauses)}",
                    params)
        except sqlite3.Error as e:
            raise self._error("write", e) from None
        return int(cur.rowcount)

    def _studies(self, where: str, params: Sequence[object]) -> list[StudyRecord]:
        if not self.exists():
            return []
        try:
            rows = self._connect().execute(
                "SELECT id, name, created_at, profile, mode, directory, runs, kind FROM studies "
                f"{where} ORDER BY id", tuple(params)).fetchall()
        except sqlite3.Error as e:
            raise self._error("read", e) from None
        return [StudyRecord(id=r[0], name=r[1], created_at=r[2], profile=r[3], mode=r[4],
                            directory=r[5], runs=json.loads(r[6]), kind=r[7]) for r in rows]


@dataclass(frozen=True, kw_only=True)
class NodeSuspect:
    """Evidence that one node of a cluster failed a job (NODE_FAIL, a stall, a GPU error)."""

    cluster: str
    node: str
    reason: str
    evidence: str
    job_id: str | None = None
    at: str = field(default_factory=utc_now)
    id: int | None = None


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
