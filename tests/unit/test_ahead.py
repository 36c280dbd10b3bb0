"""Questions asked ahead: the same answers as asked in place, once, never across commands."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from hpctrain.places import LocalPlace
from hpctrain.plan import JobRequest
from hpctrain.profiles import load_profile
from hpctrain.snapshots.spec import check_here, code_spec
from hpctrain.startup import ahead
from hpctrain.submission.prepare import run_dir_for


def test_an_answer_is_taken_once_and_a_question_not_started_is_asked_in_place() -> None:
    asked: list[str] = []
    release = threading.Event()

    def slow() -> str:
        release.wait(5)
        asked.append(threading.current_thread().name)
        return "early"

    with ahead.scope():
        ahead.start("k", slow)
        ahead.start("k", lambda: "twice")  # the first one stands
        release.set()
        assert ahead.answer("k", lambda: "late") == "early"
        assert ahead.answer("k", lambda: "late") == "late"  # taken: asked anew
        assert ahead.answer("other", lambda: "here") == "here"
    assert asked == ["hpctrain-ahead"]


def test_an_error_is_raised_to_whoever_takes_the_answer() -> None:
    def fails() -> None:
        raise OSError("scontrol: no such file")

    with ahead.scope():
        ahead.start("k", fails)
        with pytest.raises(OSError, match="scontrol"):
            ahead.answer("k", lambda: None)


def test_what_one_command_did_not_take_is_not_handed_to_the_next() -> None:
    with ahead.scope():
        ahead.start("state", lambda: "before the edit")
    with ahead.scope():
        assert ahead.answer("state", lambda: "now") == "now"


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t",
                    *args], check=True, capture_output=True)


def test_a_local_submit_takes_every_answer_its_place_asked_ahead(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The keys a place starts are those the submit asks: else the speed is silently lost."""
    monkeypatch.setattr("hpctrain.snapshots.index.RACY_S", 0.0)
    project = tmp_path / "p q;$(x)"
    project.mkdir()
    (project / "train.py").write_text("print(1)\n")
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "p")
    place = LocalPlace(workdir=project)
    profile = load_profile("local")
    req = JobRequest(profile=profile, command=["python", "train.py"], in_place=("data/",))
    (project / "data").mkdir()
    with ahead.scope():
        place.ask_ahead(req, acting=True)
        started = set(ahead._started)
        assert {k[0] for k in started} == {"reservations", "git view", "git state"}
        spec = code_spec(project, run_dir_for(profile.output_dir, "job", project), req.in_place)
        checked = check_here(spec, project)
        assert checked.listing is not None and checked.listing.state is not None
        state = place.git()
        assert state is not None and not state.dirty
        # Nothing SLURM was asked here: the reservations' answer (an error without SLURM, or
        # the list) is the only one left.
        assert {k[0] for k in ahead._started} == {"reservations"}
    assert not ahead._started


def test_a_dry_run_does_not_ask_for_the_commit(tmp_path: Path) -> None:
    with ahead.scope():
        LocalPlace(workdir=tmp_path).ask_ahead(
            JobRequest(profile=load_profile("local"), command=["true"], snapshot=False),
            acting=False)
        assert {k[0] for k in ahead._started} == {"reservations"}
