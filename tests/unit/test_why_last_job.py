"""`hpctrain why` without a job id explains the last job submitted, as `logs` shows its log."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpctrain.cli import app
from hpctrain.history import History
from hpctrain.slurm.runner import Result
from tests.jobs.helpers import ReplayClient, track

runner = CliRunner()
# A job that raised ZeroDivisionError on the dev cluster (SLURM 24.11): its sacct and logs.
CASE = Path(__file__).resolve().parents[1] / "diagnosis" / "recorded" / "slurm-24.11" / "exception"


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def _replay(monkeypatch: pytest.MonkeyPatch) -> ReplayClient:
    data = json.loads((CASE / "sacct.json").read_text())
    sacct = Result(tuple(data["argv"]), data["returncode"], data["stdout"], data["stderr"])
    client = ReplayClient({"sacct": sacct}, slurm="slurm-24.11")
    monkeypatch.setattr("hpctrain.cli.backends.slurm", lambda: (client, "hpctrain-dev"))
    return client


def test_why_without_an_id_explains_the_last_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = _replay(monkeypatch)
    for name in ("stdout.log", "stderr.log"):
        shutil.copy(CASE / name, tmp_path / name)
    track(History(), "360", stdout_path=str(tmp_path / "other.out"))
    track(History(), "361", stdout_path=str(tmp_path / "stdout.log"),
          stderr_path=str(tmp_path / "stderr.log"))
    res = runner.invoke(app, ["why", "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["job_id"] == "361" and got["cause"] == "exception", got
    assert "ZeroDivisionError" in got["summary"]
    assert [c for c in client.calls if c[0] == "sacct" and "361" in c] != []
    # The same as naming it.
    named = runner.invoke(app, ["why", "361", "--json"])
    assert json.loads(named.stdout) == got


def test_why_without_an_id_and_no_job_says_so() -> None:
    res = runner.invoke(app, ["why"])
    assert res.exit_code == 1
    assert "no job has been submitted yet" in str(res.exception)
