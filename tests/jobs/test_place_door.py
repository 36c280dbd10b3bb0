"""The commands reach a job's place only through places/: a place added to the table is what
`logs`, `cancel --all` and `status`'s verdicts use, by the facts it states (no cluster)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpctrain import places
from hpctrain.cli import app
from hpctrain.history import History, JobRecord, StateUpdate
from hpctrain.places import LocalPlace
from hpctrain.profiles.model import Profile
from hpctrain.tracking.why import verdicts
from tests.diagnosis.test_recorded import SETS

from .helpers import ReplayClient, recording, track

runner = CliRunner()


class Afar(LocalPlace):
    """A place the table knows by the login `afar`: its files are shown as afar's, its reads
    are free (say, a shared file system), and its SLURM is `client`."""

    client: ReplayClient | None = None
    login = "afar"  # type: ignore[assignment]

    def shown(self, path: Path | str) -> str:
        return f"afar:{path}"

    @classmethod
    def for_profile(cls, profile: Profile, login: str | None,
                    python_choice: str | None) -> Afar | None:
        return None

    @classmethod
    def for_record(cls, record: JobRecord, login: str | None) -> Afar | None:
        client = cls.client
        if record.login != "afar":
            return None
        return cls(lambda: client) if client else cls()  # type: ignore[arg-type,return-value]


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(places.choose, "PLACES", (Afar, *places.PLACES))
    return tmp_path / "home"


def test_logs_reads_at_the_job_s_place_and_says_where(tmp_path: Path) -> None:
    out = tmp_path / "j.out"
    track(History(), "5", login="afar", stdout_path=str(out))
    res = runner.invoke(app, ["logs", "5"])
    assert res.exit_code == 1 and f"no output file yet (afar:{out})" in str(res.exception)
    out.write_text("a\nb\n")
    assert runner.invoke(app, ["logs", "5", "--tail", "1"]).stdout == "b\n"


def test_logs_follow_through_a_place_on_another_cluster_prints_without_following(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = ReplayClient({"squeue": recording("squeue_mixed")})
    monkeypatch.setattr(client, "cluster_name", lambda: "elsewhere")
    monkeypatch.setattr(Afar, "client", client)
    out = tmp_path / "j.out"
    out.write_text("line\n")
    track(History(), "9", login="afar", cluster="hpctrain-dev", stdout_path=str(out))
    res = runner.invoke(app, ["logs", "-f", "9"])
    assert res.exit_code == 0, res.output
    assert res.stdout == "line\n" and "printing the file without following" in res.stderr
    assert client.calls == []


def test_cancel_all_through_a_login_with_nothing_there_asks_no_slurm(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    client = ReplayClient({})
    # This machine's SLURM knows no cluster (a laptop): it must not be asked at all.
    monkeypatch.setattr(client, "cluster_name", lambda: None)
    monkeypatch.setattr("hpctrain.cli.backends.slurm", lambda: (client, ""))
    track(History(), "7")
    res = runner.invoke(app, ["cancel", "--all", "--login", "raven", "--yes", "--json"])
    assert res.exit_code == 0, res.output
    assert '"cancelled": []' in res.stdout and client.calls == []


def test_verdicts_read_logs_where_the_place_says_reads_are_free(tmp_path: Path) -> None:
    case = SETS[0] / "exception"
    out = tmp_path / "job.out"
    shutil.copyfile(case / "stdout.log", out)
    shutil.copyfile(case / "stderr.log", err := tmp_path / "job.err")
    history = History(tmp_path / "h.sqlite3")
    for job, login in (("1", "afar"), ("2", "raven")):
        (row,) = track(history, job, login=login, stdout_path=str(out), stderr_path=str(err))
        history.update([StateUpdate(id=row.id, state="FAILED", terminal=True, stale=False,
                                    slurm_state="FAILED", exit_code=1, signal=0)])
    made = verdicts(history, history.all(), LocalPlace(workdir=tmp_path))
    # afar's reads are free: judged on its logs; raven's cost round trips: on its state.
    assert [r.verdict for r in made] == ["ZeroDivisionError: division by zero", "exit 1"]
