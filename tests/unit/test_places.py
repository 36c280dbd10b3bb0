"""The places' own promises that need no cluster: LocalPlace.write is atomic; one resolver
chooses the place; the places state what differs; a login reads and follows over its master."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import pytest

from hpctrain import places
from hpctrain.history import History, JobRecord
from hpctrain.places import LocalPlace
from hpctrain.places.login import LoginPlace
from hpctrain.profiles.model import Login, Profile
from hpctrain.remote.connection import Connection, Target
from tests.jobs.helpers import track


def test_local_write_never_shows_a_partial_file(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "run.json"
    target.write_text("old\n")
    seen: list[tuple[str, str]] = []
    real_replace = os.replace

    def watching_replace(src: str, dst: str) -> None:
        # The moment before the swap: the target is still whole and old, the new text whole.
        seen.append((Path(dst).read_text(), Path(src).read_text()))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", watching_replace)
    new = "x" * 1_000_000 + "\n"
    LocalPlace(workdir=tmp_path).write(target, new)
    assert seen == [("old\n", new)]
    assert target.read_text() == new


def test_a_failed_local_write_leaves_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "alternatives.txt"
    target.write_text("1 1x1\n")
    with pytest.raises(UnicodeError):
        # A lone surrogate cannot be encoded: the write fails half way through.
        LocalPlace(workdir=tmp_path).write(target, "2 2x1\n" * 1000 + "\ud800")
    assert target.read_text() == "1 1x1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alternatives.txt"]


def test_local_read_file_gives_the_last_lines_and_the_size(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_bytes(b"a\nb\nc\n")
    place = LocalPlace(workdir=tmp_path)
    assert place.read_file(log, None) == (b"a\nb\nc\n", 6)
    assert place.read_file(log, 2) == (b"b\nc\n", 6)
    assert place.read_file(log, 0) == (b"", 6)
    assert place.read_file(log, 5) == (b"a\nb\nc\n", 6)
    assert place.read_file(tmp_path / "none.out", None) is None


# --- the one door: which place, what it states, reading and following there ---------------

def _profile(login: Login | None = None) -> Profile:
    from hpctrain.profiles import load_profile

    return dataclasses.replace(load_profile("local"), login=login)


def _record(tmp_path: Path, job_id: str = "1", **kw: object) -> JobRecord:
    return track(History(tmp_path / "h.sqlite3"), job_id, **kw)[0]


class _ShellConnection(Connection):
    """A login that is this machine's sh: the place's real commands, no ssh, counted."""

    def run(self, command: str, *, input: bytes | None = None,
            timeout_s: float = 60.0) -> tuple[bytes, bytes, int]:
        self.round_trips += 1
        done = subprocess.run(["sh", "-c", command], input=input, capture_output=True,
                              timeout=timeout_s, check=False)
        return done.stdout, done.stderr, done.returncode


def _login_place(tmp_path: Path) -> LoginPlace:
    return LoginPlace(_ShellConnection(Target("testlogin"), "testlogin"), local_root=tmp_path)


def test_one_resolver_gives_a_profile_s_or_a_record_s_place(tmp_path: Path) -> None:
    local = LocalPlace(workdir=tmp_path)
    assert places.place_for(_profile(), local) is local
    over = places.place_for(_profile(), local, login="me@elsewhere")
    assert isinstance(over, LoginPlace) and over.login == "me@elsewhere"
    section = Login(host="raven", workdir="/w")
    there = places.place_for(_profile(section), local, python_choice="none")
    assert isinstance(there, LoginPlace) and (there.login, there.section) == ("raven", section)
    assert places.place_for(_record(tmp_path), local) is local
    job = _record(tmp_path, "2", login="raven")
    assert isinstance(gone := places.place_for(job, local), LoginPlace) and gone.login == "raven"
    # --login DEST reads a job (even one submitted here) through another destination.
    assert places.place_for(_record(tmp_path, "3"), local, "other").login == "other"


def test_a_new_place_is_one_class_and_one_line(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    class Elsewhere(LocalPlace):
        login = "elsewhere"  # type: ignore[assignment]

        @classmethod
        def for_profile(cls, profile: Profile, login: str | None,
                        python_choice: str | None) -> Elsewhere | None:
            return cls(workdir=tmp_path) if login == "elsewhere" else None

        @classmethod
        def for_record(cls, record: JobRecord, login: str | None) -> Elsewhere | None:
            return cls(workdir=tmp_path) if record.login == "elsewhere" else None

    monkeypatch.setattr(places.choose, "PLACES", (Elsewhere, *places.PLACES))
    local = LocalPlace(workdir=tmp_path)
    assert isinstance(places.place_for(_profile(), local, login="elsewhere"), Elsewhere)
    assert isinstance(places.place_for(_record(tmp_path, login="elsewhere"), local), Elsewhere)
    assert isinstance(places.place_for(_record(tmp_path, "2", login="raven"), local),
                      LoginPlace)


def test_the_places_state_what_differs(tmp_path: Path) -> None:
    here, there = LocalPlace(workdir=tmp_path), _login_place(tmp_path)
    facts = ("uids_known_here", "free_reads", "run_dirs_on_this_disk")
    assert [getattr(here, f) for f in facts] == [True, True, True]
    assert [getattr(there, f) for f in facts] == [False, False, False]
    assert (here.where, there.where) == ("here", "on testlogin")
    assert here.shown("/r/job.out") == "/r/job.out"
    assert there.shown(Path("/r/job.out")) == "testlogin:/r/job.out"


def test_records_are_grouped_by_the_place_they_went_through(tmp_path: Path) -> None:
    history = History(tmp_path / "h.sqlite3")
    rows = [*track(history, "1", "2"), *track(history, "3", login="raven"),
            *track(history, "4", login="raven", login_config="/c"), *track(history, "5")]
    groups = places.grouped(rows)
    assert {k: [r.job_id for r in g] for k, g in groups.items()} == {
        (None, None): ["1", "2", "5"], ("raven", None): ["3"], ("raven", "/c"): ["4"]}
    assert [r.job_id for r in places.submitted_through(rows, None)] == ["1", "2", "5"]
    assert [r.job_id for r in places.submitted_through(rows, "raven")] == ["3", "4"]
    local = LocalPlace(workdir=tmp_path)
    found = places.by_place(rows, local)
    assert found[0][0] is local and [p.login for p, _g in found[1:]] == ["raven", "raven"]


def test_a_login_reads_and_asks_in_one_round_trip(tmp_path: Path) -> None:
    log = tmp_path / "a b'c.out"
    log.write_bytes(b"1\n2\n3\n")
    place = _login_place(tmp_path)
    answers, files = place.ask_and_read(
        [("echo", "sacct; here"), ("sh", "-c", "exit 4")],
        [(log, 2), (log, None), (tmp_path / "none.json", None)])
    assert place.conn.round_trips == 1
    assert answers == [("sacct; here\n", "", 0), ("", "", 4)]
    assert files == [(b"2\n3\n", 6), (b"1\n2\n3\n", 6), None]
    assert place.read_file(log, 1) == (b"3\n", 6) == LocalPlace().read_file(log, 1)
    assert place.read_file(tmp_path / "none", None) is None


def test_each_place_follows_a_growing_log(tmp_path: Path) -> None:
    log = tmp_path / "job.out"
    log.write_bytes(b"old\n")
    for place in (LocalPlace(workdir=tmp_path), _login_place(tmp_path)):
        reader = place.follower(log, 4)
        try:
            assert reader.read_new() == b""
            with open(log, "ab") as fh:
                fh.write(b"new\n")
            assert reader.read_new() == b"new\n"
            reader.wait(0.0)
        finally:
            reader.close()
        log.write_bytes(b"old\n")
    assert LocalPlace().follower(log, 0).poll_s < _login_place(tmp_path).follower(log, 0).poll_s


def test_why_names_who_cancelled_only_where_uids_are_this_machine_s(tmp_path: Path) -> None:
    from hpctrain.slurm.accounting import Accounting, summary_row
    from hpctrain.slurm.states import JobState
    from hpctrain.tracking.why import _user_names

    row = dataclasses.replace(summary_row("1", JobState.CANCELLED, "CANCELLED", exit_code=0,
                                          signal=15, elapsed_s=5, time_limit_s=60,
                                          node_list="node1"), cancelled_by_uid=os.getuid())
    acct = Accounting((row,))
    assert list(_user_names(acct, LocalPlace(workdir=tmp_path))) == [os.getuid()]
    assert _user_names(acct, _login_place(tmp_path)) == {}
