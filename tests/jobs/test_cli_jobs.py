"""The job commands without a cluster: help, dry run, argument errors, light imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpctrain.cli import app
from hpctrain.cli.jobview import fmt_duration
from hpctrain.history import History, StateUpdate

from .helpers import ReplayClient, recorded_jobs, recording, track

runner = CliRunner()


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


@pytest.mark.parametrize("cmd", ["submit", "status", "logs", "cancel"])
def test_help_has_example(cmd: str) -> None:
    res = runner.invoke(app, [cmd, "--help"])
    assert res.exit_code == 0 and f"Example: hpctrain {cmd}" in res.output


def test_dry_run_creates_and_submits_nothing(tmp_path: Path, _home: Path) -> None:
    res = runner.invoke(app, ["submit", "--profile", "local", "--nodes", "2", "--dry-run",
                              "--json", "--", "printenv", "SLURMD_NODENAME"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["dry_run"] is True and data["job_id"] is None
    run_dir = Path(data["run_dir"])
    assert run_dir.parent == tmp_path / "hpctrain-runs" and run_dir.is_absolute()
    assert data["script"] == str(run_dir / "job.sbatch")
    assert f"#SBATCH --output={run_dir}/%x-%j.out" in data["script_text"]
    assert f"export HPCTRAIN_RUN_DIR={run_dir}" in data["script_text"]
    assert data["plan"]["nodes"] == 2 and data["plan"]["total_gpus"] == 4
    # (The profile loader may cache under HPCTRAIN_HOME; the history is not touched.)
    assert not (tmp_path / "hpctrain-runs").exists()
    assert not (_home / "state" / "history.sqlite3").exists()


def test_dry_run_plain_prints_script_and_run_dir(tmp_path: Path) -> None:
    res = runner.invoke(app, ["submit", "--profile", "local", "--dry-run", "--", "true"])
    assert res.exit_code == 0
    assert res.stdout.startswith("#!/bin/bash")
    assert "the run directory would be" in res.stderr and "nothing created" in res.stderr
    assert not (tmp_path / "hpctrain-runs").exists()


def test_submit_invalid_plan_is_an_error_before_slurm(tmp_path: Path) -> None:
    res = runner.invoke(app, ["submit", "--profile", "local", "--gpus-per-node", "8", "--",
                              "true"])
    assert res.exit_code != 0 and not (tmp_path / "hpctrain-runs").exists()


def test_status_with_empty_history(_home: Path) -> None:
    res = runner.invoke(app, ["status", "--json"])
    assert res.exit_code == 0
    # Nothing to refresh: neither SLURM nor its configuration is consulted, so no cluster.
    assert json.loads(res.stdout) == {"cluster": None, "slurm_calls": 0, "warnings": [],
                                      "jobs": []}
    res = runner.invoke(app, ["status"])
    assert res.exit_code == 0 and "No jobs in the history" in res.stderr
    assert not (_home / "state" / "history.sqlite3").exists()


def test_status_of_finished_jobs_needs_no_slurm(_home: Path) -> None:
    history = History()
    (rec,) = track(history, "12", job_name="[bold]x", cluster="nowhere")
    history.update([StateUpdate(id=rec.id, state="FAILED", terminal=True, stale=False,
                                exit_code=2, signal=0, elapsed_s=3725, node_list="node1")])
    res = runner.invoke(app, ["status", "--all"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    # Job names are shown as written, never as rich markup.
    assert "[bold]x" in res.stdout and "FAILED" in res.stdout and "exit 2" in res.stdout
    assert "1:02:05/1:00" in res.stdout
    data = json.loads(runner.invoke(app, ["status", "12", "--json"]).stdout)
    assert data["slurm_calls"] == 0
    job = data["jobs"][0]
    assert {k: job[k] for k in ("job_id", "state", "exit_code", "terminal", "name")} == {
        "job_id": "12", "state": "FAILED", "exit_code": 2, "terminal": True, "name": "[bold]x"}


def test_argument_errors() -> None:
    res = runner.invoke(app, ["cancel"])
    assert res.exit_code == 1 and "--all" in str(res.exception)
    res = runner.invoke(app, ["status", "--watch", "--json"])
    assert res.exit_code == 1 and "do not mix" in str(res.exception)
    res = runner.invoke(app, ["logs"])
    assert res.exit_code == 1 and "no job has been submitted" in str(res.exception)


def test_logs_prints_the_recorded_file(tmp_path: Path) -> None:
    out = tmp_path / "j.out"
    out.write_text("".join(f"{i}\n" for i in range(1, 101)))
    track(History(), "5", stdout_path=str(out), stderr_path=str(tmp_path / "j.err"))
    assert runner.invoke(app, ["logs", "5"]).stdout == out.read_text()
    assert runner.invoke(app, ["logs", "--tail", "2"]).stdout == "99\n100\n"
    res = runner.invoke(app, ["logs", "--err"])
    assert res.exit_code == 1 and "no output file yet" in str(res.exception)


def test_fmt_duration() -> None:
    assert [fmt_duration(s) for s in (None, 5, 65, 3725, 93784)] == [
        "-", "0:05", "1:05", "1:02:05", "1-02:03:04"]


def test_status_help_imports_no_heavy_modules() -> None:
    code = (
        "import sys\n"
        "sys.argv = ['hpctrain', 'status', '--help']\n"
        "from hpctrain.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('torch', 'lightning', 'sqlite3', 'rich.live', 'yaml.cyaml')"
        " if m in sys.modules]\n"
        "print(heavy, file=sys.stderr)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    heavy = res.stderr.strip().splitlines()[-1]
    assert "torch" not in heavy and "lightning" not in heavy and "sqlite3" not in heavy


def _replay_slurm(monkeypatch: pytest.MonkeyPatch) -> ReplayClient:
    """The commands' SLURM client answers with recordings from the dev cluster."""
    client = ReplayClient({"squeue": recording("squeue_mixed"),
                           "sacct": recording("sacct_mixed"),
                           "scancel": recording("scancel_done")})
    monkeypatch.setattr("hpctrain.cli.backends.slurm", lambda: (client, "hpctrain-dev"))
    return client


def test_status_and_cancel_go_through_the_watcher(monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = recorded_jobs()
    client = _replay_slurm(monkeypatch)
    track(History(), *jobs.values())
    track(History(), "7", cluster="raven")
    data = json.loads(runner.invoke(app, ["status", "--json"]).stdout)
    assert data["slurm_calls"] == 2 == len(client.calls)
    states = {j["job_id"]: j["state"] for j in data["jobs"]}
    assert states[jobs["failed"]] == "FAILED" and states[jobs["running2"]] == "RUNNING"
    assert any("raven" in w for w in data["warnings"])
    res = runner.invoke(app, ["cancel", "--all", "--yes", "--json"])
    assert res.exit_code == 0, res.output
    unfinished = {jobs[k] for k in ("running2", "dependency", "begintime", "resources",
                                    "timeout")}
    assert set(json.loads(res.stdout)["cancelled"]) == unfinished
    assert client.calls[-1][0] == "scancel"


def test_status_watch_draws_the_table_until_ctrl_c(monkeypatch: pytest.MonkeyPatch) -> None:
    _replay_slurm(monkeypatch)
    track(History(), recorded_jobs()["running2"])

    def interrupt(_seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("hpctrain.cli.jobview.time.sleep", interrupt)
    res = runner.invoke(app, ["status", "--watch"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "RUNNING" in res.stdout and "SLURM call(s)" in res.stdout


def test_logs_follow_of_another_clusters_job_without_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _replay_slurm(monkeypatch)
    track(History(), "9", cluster="raven", stdout_path=str(tmp_path / "none.out"))
    res = runner.invoke(app, ["logs", "-f", "9"])
    assert res.exit_code == 0, res.output
    assert "printing the file without following" in res.stderr


def test_logs_follow_exits_1_unless_the_job_completed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`hpctrain logs -f JOB && next` must not go on after a failed job (newcomer review 9)."""
    jobs = recorded_jobs()
    _replay_slurm(monkeypatch)
    for name in ("completed", "failed"):
        out = tmp_path / f"{name}.out"
        out.write_text(f"{name} job's line\n")
        track(History(), jobs[name], stdout_path=str(out))
    res = runner.invoke(app, ["logs", "-f", jobs["completed"]])
    assert res.exit_code == 0, res.output
    assert res.stderr.strip().endswith(f"job {jobs['completed']} COMPLETED")
    res = runner.invoke(app, ["logs", "-f", jobs["failed"]])
    assert res.exit_code == 1 and res.stdout == "failed job's line\n"
    assert res.stderr.strip().endswith(f"job {jobs['failed']} FAILED (exit code 3)")
    assert "Traceback" not in res.output
    # Without -f the exit status says nothing about the job.
    assert runner.invoke(app, ["logs", jobs["failed"]]).exit_code == 0
