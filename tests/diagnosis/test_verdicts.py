"""`status`'s verdicts: made once for each ended job from its state and logs (recorded output
of real jobs), kept in the history, and never made again."""

from __future__ import annotations

import shutil
from pathlib import Path

from hpctrain.history import MIGRATIONS, History, StateUpdate
from hpctrain.places.local import LocalPlace
from hpctrain.tracking.why import verdicts
from tests.diagnosis.test_recorded import SETS
from tests.jobs.helpers import track


def _ended(history: History, job_id: str, tmp_path: Path, **kw: object) -> None:
    (row,) = track(history, job_id, **kw)
    history.update([StateUpdate(id=row.id, state="FAILED", terminal=True, stale=False,
                                slurm_state="FAILED", exit_code=1, signal=0)])


def _place(tmp_path: Path) -> LocalPlace:
    def no_slurm() -> None:
        raise AssertionError("a verdict asks SLURM nothing")
    return LocalPlace(no_slurm, tmp_path)  # type: ignore[arg-type]


def test_a_verdict_is_made_once_from_the_logs_and_kept(tmp_path: Path) -> None:
    case = SETS[0] / "exception"
    out, err = tmp_path / "job.out", tmp_path / "job.err"
    shutil.copyfile(case / "stdout.log", out)
    shutil.copyfile(case / "stderr.log", err)
    history = History(tmp_path / "h.sqlite3")
    _ended(history, "11", tmp_path, stdout_path=str(out), stderr_path=str(err))
    # A job submitted through a login: judged from its state alone (no ssh round trips).
    _ended(history, "12", tmp_path, login="user@login", stdout_path=str(out))
    records = history.all()
    assert [r.verdict for r in records] == [None, None]
    made = verdicts(history, records, _place(tmp_path))
    assert [r.verdict for r in made] == ["ZeroDivisionError: division by zero", "exit 1"]
    assert [r.verdict for r in history.all()] == [r.verdict for r in made]
    # Made once: the logs gone, the verdict stays what it was.
    out.unlink()
    err.unlink()
    again = verdicts(history, history.all(), _place(tmp_path))
    assert again[0].verdict == "ZeroDivisionError: division by zero"
    assert history.schema_version() == len(MIGRATIONS)


def test_unfinished_jobs_get_no_verdict(tmp_path: Path) -> None:
    history = History(tmp_path / "h.sqlite3")
    track(history, "21")
    assert verdicts(history, history.all(), _place(tmp_path))[0].verdict is None


def test_the_monitors_own_stop_is_no_cause_without_sacct_steps(tmp_path: Path) -> None:
    # status knows no steps: the monitor's USR2 ("User defined signal 2" from srun) must be
    # told from the job's own by the monitor's last line in the log, as `why` does by its step.
    case = SETS[0] / "exit_code"
    err = tmp_path / "job.err"
    shutil.copyfile(case / "stderr.log", err)
    assert "User defined signal 2" in err.read_text()
    history = History(tmp_path / "h.sqlite3")
    (row,) = track(history, "31", stderr_path=str(err))
    history.update([StateUpdate(id=row.id, state="FAILED", terminal=True, stale=False,
                                slurm_state="FAILED", exit_code=3, signal=0)])
    assert verdicts(history, history.all(), _place(tmp_path))[0].verdict == "exit 3"
