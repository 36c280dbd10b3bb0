"""The history's SQLite file: opening it, its ordered, recorded migrations, its transactions.

Concurrency: WAL mode and a busy timeout, and every write in a `BEGIN IMMEDIATE` transaction,
so that many `hpctrain submit` processes started at once all get their row in.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hpctrain.errors import HistoryError

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
    (
        # A race's winner ("JOBID NODESxGPUS", its claim file's words), learned once through
        # the race's place: over a login the claim is not on this disk.
        "0010_race_winners",
        ("ALTER TABLE jobs ADD COLUMN race_winner TEXT",),
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


class Database:
    """The history's file at `path`, opened (and migrated) on first use."""

    def __init__(self, path: Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self._conn: sqlite3.Connection | None = None

    def exists(self) -> bool:
        return self.path.is_file()

    def connect(self) -> sqlite3.Connection:
        """The open connection, made (and the schema migrated) on the first call."""
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
            raise self.error("open", e) from None
        except OSError as e:
            raise HistoryError(
                f"cannot create the job history's directory {self.path.parent}: {e.strerror}",
                "set HPCTRAIN_HOME to a writable directory",
            ) from None
        return conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def schema_version(self) -> int:
        return int(self.connect().execute("PRAGMA user_version").fetchone()[0])

    @contextmanager
    def writing(self) -> Iterator[sqlite3.Connection]:
        """The connection inside one write transaction; SQLite's errors become HistoryError."""
        conn = self.connect()
        try:
            with _transaction(conn):
                yield conn
        except sqlite3.Error as e:
            raise self.error("write", e) from None

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        """Every row `sql` selects; SQLite's errors become HistoryError."""
        conn = self.connect()
        try:
            return conn.execute(sql, tuple(params)).fetchall()
        except sqlite3.Error as e:
            raise self.error("read", e) from None

    def error(self, what: str, e: sqlite3.Error) -> HistoryError:
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

    def _migrate(self, conn: sqlite3.Connection) -> None:
        current = conn.execute("PRAGMA user_version").fetchone()[0]
        if current == len(MIGRATIONS):
            return
        with _transaction(conn):
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
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    # IMMEDIATE takes the write lock up front, so two writers never deadlock upgrading
    # read locks; the busy timeout makes the second one wait instead of failing.
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
