"""The SQLite job history: migrations, writes, terminal caching, concurrent writers."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from hpctrain.errors import HistoryError
from hpctrain.history import MIGRATIONS, History, StateUpdate

from .helpers import new_job, track


def test_fresh_history_is_migrated_and_in_wal_mode(history: History) -> None:
    assert not history.exists()
    assert history.all() == [] and history.last() is None  # reading creates nothing
    assert not history.exists()
    track(history, "1")
    assert history.schema_version() == len(MIGRATIONS)
    con = sqlite3.connect(history.path)
    rows = con.execute("SELECT version, name FROM schema_migrations ORDER BY version").fetchall()
    assert [name for _, name in rows] == [name for name, _ in MIGRATIONS]
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_add_round_trips_every_field(history: History) -> None:
    rec = history.add(new_job(
        "42", command=["python", "train.py", "--lr", "1e-3"], run_dir="/r", script_path="/r/s",
        stdout_path="/r/o", stderr_path="/r/e", git_commit="abc", git_dirty=True, nodes=2,
        gpus_per_node=2, total_gpus=4,
    ))
    assert rec.job_id == "42" and rec.state == "PENDING" and not rec.terminal
    assert rec.command == ["python", "train.py", "--lr", "1e-3"]
    assert rec.git_dirty is True and rec.total_gpus == 4 and rec.time_limit_s == 60
    assert history.last() == rec
    assert history.by_job_ids(["42"]) == [rec]


def test_terminal_rows_are_never_overwritten(history: History) -> None:
    (rec,) = track(history, "5")
    history.update([StateUpdate(id=rec.id, state="COMPLETED", terminal=True, stale=False,
                                exit_code=0)])
    # A late, older answer must not revive a finished job.
    changed = history.update([StateUpdate(id=rec.id, state="RUNNING", terminal=False,
                                          stale=False)])
    assert changed == 0
    (again,) = history.by_job_ids(["5"])
    assert again.state == "COMPLETED" and again.terminal and again.exit_code == 0
    assert history.unfinished() == []


def test_recent_is_unfinished_plus_last_n(history: History) -> None:
    recs = track(history, *(str(i) for i in range(1, 31)))
    for r in recs[1:]:
        history.update([StateUpdate(id=r.id, state="COMPLETED", terminal=True, stale=False)])
    shown = [r.job_id for r in history.recent(5)]
    # Job 1 is unfinished and stays visible however old it is.
    assert shown == ["1", "26", "27", "28", "29", "30"]
    assert len(history.all()) == 30 and history.count() == 30


def test_same_id_on_two_clusters_are_two_jobs(history: History) -> None:
    history.add(new_job("7", cluster="raven"))
    history.add(new_job("7", cluster="hpctrain-dev"))
    assert [r.cluster for r in history.by_job_ids(["7"])] == ["raven", "hpctrain-dev"]


def test_reused_id_replaces_the_old_row(history: History) -> None:
    (old,) = track(history, "9")
    history.update([StateUpdate(id=old.id, state="FAILED", terminal=True, stale=False,
                                exit_code=1)])
    new = history.add(new_job("9", job_name="second"))
    assert new.id == old.id and new.job_name == "second" and new.state == "PENDING"
    assert not new.terminal and new.exit_code is None


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    track(History(path), "1")
    con = sqlite3.connect(path)
    con.execute("INSERT INTO schema_migrations VALUES (99, 'future', 'x')")
    con.execute("PRAGMA user_version = 99")
    con.commit()
    con.close()
    with pytest.raises(HistoryError, match="newer hpctrain"):
        History(path).all()


def test_unwritable_history_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(HistoryError, match="HPCTRAIN_HOME"):
        History(blocker / "sub" / "h.sqlite3").add(new_job("1"))


_WRITER = """
import sys
from hpctrain.history import History, NewJob
h = History(__import__("pathlib").Path(sys.argv[1]))
h.add(NewJob(job_id=sys.argv[2], cluster="c", profile="p", job_name="n", partition=None,
             nodes=1, gpus_per_node=0, total_gpus=0, command=["true"], run_dir=None,
             script_path=None, stdout_path=None, stderr_path=None, workdir="/",
             git_commit=None, git_dirty=None))
"""


def test_twenty_concurrent_writers_on_a_fresh_history(tmp_path: Path) -> None:
    """Twenty processes that create, migrate and write at once: no row is lost."""
    path = tmp_path / "fresh" / "h.sqlite3"
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(i)],
                         stderr=subprocess.PIPE, text=True)
        for i in range(20)
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errors
    h = History(path)
    assert sorted(int(r.job_id) for r in h.all()) == list(range(20))
    assert h.schema_version() == len(MIGRATIONS)
