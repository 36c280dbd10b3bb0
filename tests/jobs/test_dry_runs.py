"""Every kind through the one pipeline: the dry runs of scale, sweep, probe and rerun print the
scripts they would submit (no SLURM needed), a rerun is planned again from its request instead
of editing its script, the place's checks run once, and one registry shows every kind."""

from __future__ import annotations

import importlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hpctrain.cli import app
from hpctrain.history import History
from hpctrain.places import LocalPlace
from hpctrain.plan import JobRequest
from hpctrain.profiles import load_profile
from hpctrain.slurm.runner import Result
from hpctrain.submission.kinds import JobKind
from hpctrain.submission.pipeline import run
from hpctrain.submission.rerun import Changes, RerunKind
from hpctrain.values import rundir
from hpctrain.values.rundir import RunDir

from .helpers import ReplayClient, here, recorded_jobs, recording

runner = CliRunner()


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


def _ok(*args: str) -> Any:
    res = runner.invoke(app, list(args))
    assert res.exit_code == 0, (res.stdout, res.stderr)
    return res


def _nothing_made(tmp_path: Path, home: Path) -> None:
    assert not (tmp_path / "hpctrain-runs").exists()
    assert not (home / "state" / "history.sqlite3").exists()


def test_scale_dry_run_prints_every_runs_script(tmp_path: Path, _home: Path) -> None:
    args = ("scale", "--profile", "local", "--topologies", "1x1,1x2", "--task", "spiral",
            "--max-epochs", "1", "--repeats", "2", "--dry-run")
    res = _ok(*args)
    labels = [ln for ln in res.stdout.splitlines() if ln.startswith("# ===== ")]
    assert [ln.split(":")[0] for ln in labels] == [
        "# ===== 1x1 #1", "# ===== 1x2 #1", "# ===== 1x1 #2", "# ===== 1x2 #2"]
    assert res.stdout.count("#!/bin/bash") == 4
    assert "--task spiral --set trainer.max_epochs=1" in res.stdout
    subprocess.run(["bash", "-n"], input=res.stdout, text=True, check=True)
    assert "4 run directories would be made" in res.stderr and "1x1 #1, 1x2 #1" in res.stderr
    data = json.loads(_ok(*args, "--json").stdout)
    assert data["dry_run"] is True and data["mode"] == "weak" and len(data["scripts"]) == 4
    jobs = data["jobs"]
    assert [(j["topology"], j["repeat"], j["plan"]["nodes"]) for j in jobs] == [
        ("1x1", 1, 1), ("1x2", 1, 1), ("1x1", 2, 1), ("1x2", 2, 1)]
    assert len({j["run_dir"] for j in jobs}) == 4
    assert [s["path"] for s in data["scripts"]] == [j["script"] for j in jobs]
    # The study's cost: every run's GPUs for its time limit (local's default 30 minutes).
    assert data["gpu_hours"] == sum(j["plan"]["gpu_hours"] for j in jobs) == 2 * (0.5 + 1.0)
    assert "the study reserves 3.0 GPU-hours at most" in res.stderr
    _nothing_made(tmp_path, _home)


def test_sweep_dry_run_prints_the_arrays_script(tmp_path: Path, _home: Path) -> None:
    args = ("sweep", "-P", "local", "--grid", "optim.lr=0.1,0.2", "--dry-run")
    res = _ok(*args)
    assert res.stdout.startswith("#!/bin/bash") and "#SBATCH --array=0-1" in res.stdout
    assert "2 point(s)" in res.stderr and "nothing created or submitted" in res.stderr
    data = json.loads(_ok(*args, "--json").stdout)
    (script,) = data["scripts"]
    assert script["text"] == data["script_text"] and script["label"] == "0-1"
    _nothing_made(tmp_path, _home)


def test_probe_dry_run_prints_the_probe_job(tmp_path: Path, _home: Path) -> None:
    from hpctrain.profiles.probe import MARKER

    res = _ok("profiles", "probe", "local", "--dry-run")
    assert res.stdout.startswith("#!/bin/bash\n# hpctrain profiles probe")
    assert "HPCTRAIN_PROBE" in res.stdout and "--signal" not in res.stdout
    assert "the run directory would be" in res.stderr
    data = json.loads(_ok("profiles", "probe", "local", "--dry-run", "--json").stdout)
    assert MARKER in data["scripts"][0]["text"] and data["plan"]["nodes"] == 1
    _nothing_made(tmp_path, _home)


def _submitted(project: Path) -> tuple[Any, str]:
    """A job submitted from `project` (its code v1) through the pipeline; its first script."""
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "mark.py").write_text("VERSION = 'v1'\n")
    client = ReplayClient({"sbatch": recording("sbatch_parsable")})
    request = JobRequest(profile=load_profile("local"), job_name="again",
                         command=("python3", "-m", "pkg.mark"), time="5")
    done = run(JobKind(request), here(client, project), History(), False).result
    assert done is not None and done.job_id == recorded_jobs()["completed"]
    return done, done.script_path.read_text()


def test_rerun_dry_run_plans_the_job_again_without_editing_its_script(
        tmp_path: Path, _home: Path) -> None:
    done, script = _submitted(tmp_path / "proj")
    old = done.run_dir
    # Neither the project nor the old script is what a rerun runs: an edit of either is unseen.
    (tmp_path / "proj" / "pkg" / "mark.py").write_text("VERSION = 'v2'\n")
    done.script_path.write_text(script + "# edited by hand\n")
    data = json.loads(_ok("rerun", done.job_id, "--dry-run", "--json").stdout)
    new = Path(data["run_dir"])
    assert data["dry_run"] is True and data["rerun_of"] == done.job_id
    assert data["snapshot"] == {"id": done.snapshot.id}
    assert data["script_text"] == script.replace(old.name, new.name) != script
    assert data["scripts"] == [{"label": "job.sbatch", "path": str(new / "job.sbatch"),
                                "text": data["script_text"]}]
    assert not new.exists() and len(History().all()) == 1
    res = _ok("rerun", done.job_id, "--dry-run", "--nodes", "2")
    assert res.stdout.startswith("#!/bin/bash") and "#SBATCH --nodes=2" in res.stdout
    assert f"a rerun of job {done.job_id}, on its snapshot {done.snapshot.id}" in res.stderr
    # The table's --nodes has no bound: the plan refuses 0 nodes as for submit (and 0 is not
    # taken for "the job's own").
    res = runner.invoke(app, ["rerun", done.job_id, "--dry-run", "--nodes", "0"])
    assert "a job needs at least 1 node" in str(res.exception), res.output


def test_rerun_runs_the_snapshot_in_a_new_run_directory(tmp_path: Path) -> None:
    done, script = _submitted(tmp_path / "proj")
    (tmp_path / "proj" / "pkg" / "mark.py").write_text("VERSION = 'v2'\n")
    (done.run_dir / f"{rundir.CONFIG_COPY}.yaml").write_text("seed: 3\n")
    client = ReplayClient({"sbatch": lambda argv: Result(argv, 0, "4242\n", "")})
    history = History()
    outcome = run(RerunKind(done.record, Changes(time="4")), here(client, tmp_path / "proj"),
                  history, False)
    again = outcome.result
    assert again is not None and again.job_id == "4242" and again.rerun_of == done.job_id
    assert outcome.facts == {} and again.snapshot.id == done.snapshot.id
    new = again.run_dir
    assert new != done.run_dir and new.parent == done.run_dir.parent
    assert (new / "code" / "pkg" / "mark.py").read_text() == "VERSION = 'v1'\n"
    assert (new / f"{rundir.CONFIG_COPY}.yaml").read_text() == "seed: 3\n"
    assert json.loads(RunDir(new).run_info.read_text())["rerun_of"] == done.job_id
    assert "#SBATCH --time=00:04:00" in (new / "job.sbatch").read_text()
    kept = json.loads(RunDir(new).request.read_text())["request"]
    assert (kept["time"], kept["command"]) == ("4", ["python3", "-m", "pkg.mark"])
    row = history.by_job_ids(["4242"])[0]
    assert row.snapshot == done.snapshot.id and row.time_limit_s == 240


class CountingPlace(LocalPlace):
    """This machine, counting the checks made at it."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(lambda: ReplayClient({}), workdir)
        self.checked: list[str] = []

    def check_files(self, run_dir: Path, files: Any) -> None:
        self.checked.append("files")
        super().check_files(run_dir, files)

    def check_code(self, spec: Any) -> Any:
        self.checked.append("code")
        return super().check_code(spec)


def test_the_pipeline_checks_each_run_directory_and_the_project_once(tmp_path: Path) -> None:
    from hpctrain.submission.scaling_study import StudyKind, StudyPlan, plan_runs
    from hpctrain.trainconfig.options import TrainerCall

    base = JobRequest(profile=load_profile("local"), job_name="scale")
    trainer = TrainerCall(task="spiral").adding([("trainer.max_epochs", 1)])
    plan = StudyPlan(base, plan_runs("1x1,1x2", strong=False, batch_size=None, trainer=trainer),
                     False, trainer.load(), repeats=2)
    place = CountingPlace(tmp_path)
    prepared = run(StudyKind(plan, None, False, None), place, History(), True).prepared
    assert place.checked == ["files"] * 4 + ["code"]
    listings = {id(r.job.code.listing) for r in prepared.runs if r.job.code}
    assert len(listings) == 1 and None not in listings  # one listing, for every run's freeze


def test_one_registry_shows_every_kinds_values() -> None:
    from hpctrain.cli import output
    from hpctrain.submission.crossrace import CrossRace, CrossRaceSubmitted
    from hpctrain.submission.prepare import Prepared
    from hpctrain.submission.race import Race
    from hpctrain.submission.scaling_study import PreparedStudy
    from hpctrain.submission.sweep import PreparedSweep

    for module in ("display", "race", "sweepview", "scale"):
        importlib.import_module(f"hpctrain.cli.{module}")
    planned = {Prepared, Race, PreparedSweep, PreparedStudy, CrossRace}
    shown = output.displays()
    assert planned | {CrossRaceSubmitted} <= set(shown)
    for kind in planned:
        for member in ("scripts", "run_dirs", "frozen_code", "with_listing", "as_dict"):
            assert callable(getattr(kind, member)), (kind, member)
