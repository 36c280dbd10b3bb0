"""What `status` and `why` say of an ended job of one's own (newcomer review 2026-11-29): who
cancelled it (7), and its start-up when no rank marked one (8)."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from hpctrain.cli.jobview import ENDED_UNMARKED, startup_lines
from hpctrain.cli.stats import show_startup
from hpctrain.diagnosis.startup import Mark, Startup, Track
from hpctrain.history import History, StateUpdate
from hpctrain.places.local import LocalPlace
from hpctrain.slurm.accounting import summary_row
from hpctrain.slurm.states import JobState
from hpctrain.tracking.why import verdicts
from tests.jobs.helpers import track


def test_the_stored_sacct_state_names_who_cancelled() -> None:
    row = summary_row("5", JobState.CANCELLED, "CANCELLED by 1234", exit_code=0, signal=None,
                      elapsed_s=3, time_limit_s=60, node_list="node1")
    assert row.cancelled_by_uid == 1234
    plain = summary_row("5", JobState.CANCELLED, "CANCELLED", exit_code=0, signal=None,
                        elapsed_s=3, time_limit_s=60, node_list="node1")
    assert plain.cancelled_by_uid is None


def test_status_names_the_user_who_cancelled_as_why_does(tmp_path: Path) -> None:
    history = History(tmp_path / "h.sqlite3")
    (row,) = track(history, "30003", stdout_path=str(tmp_path / "none.out"))
    uid = os.getuid()
    history.update([StateUpdate(id=row.id, state="CANCELLED", terminal=True, stale=False,
                                slurm_state=f"CANCELLED by {uid}", exit_code=0, signal=15)])

    def no_slurm() -> None:
        raise AssertionError("a verdict asks SLURM nothing")

    (made,) = verdicts(history, history.all(), LocalPlace(no_slurm, tmp_path))  # type: ignore[arg-type]
    assert made.verdict is not None and "someone" not in made.verdict
    assert f"{pwd.getpwuid(uid).pw_name} (uid {uid})" in made.verdict, made.verdict


def _startup(ranks: tuple[Track, ...]) -> Startup:
    batch = Track("node1", None, (Mark("job started", 0.0), Mark("ranks launched", 0.1)))
    return Startup(job="5", restart=0, origin=0.0, origin_name="job's start", batch=(batch,),
                   ranks=ranks)


def test_an_ended_job_whose_program_marked_no_start_is_not_said_to_be_starting() -> None:
    unmarked = _startup(())
    lines = startup_lines(unmarked, ended=True)
    assert lines[0] == ENDED_UNMARKED and "yet" not in lines[0]
    assert "node1 batch script" in lines[1]
    # Still running: "not yet" is true, and said so.
    assert startup_lines(unmarked, ended=False)[0].endswith("yet")
    # A program that marked its start keeps its headline.
    marked = _startup((Track("node1", 0, (Mark("process start", 0.2), Mark("first step", 1.0))),))
    assert startup_lines(marked, ended=True)[0].startswith("start-up: first step")


def test_stats_says_the_same_of_an_ended_job_whose_program_marked_no_start(
        capsys: pytest.CaptureFixture[str]) -> None:
    show_startup(_startup(()), ended=True)
    assert ENDED_UNMARKED in capsys.readouterr().out
    show_startup(_startup(()), ended=False)
    assert "no rank has marked its start yet" in capsys.readouterr().out
