"""Submit without a cluster: run directory names, log paths, git state, and the run directory
on acceptance, refusal and timeout (sbatch's answers as recorded on the dev cluster)."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from hpctrain.errors import HpctrainError, SlurmError
from hpctrain.history import History
from hpctrain.jobs import submit as sub
from hpctrain.plan import JobRequest, build_plan
from hpctrain.profiles import load_profile
from hpctrain.render import render_script
from hpctrain.slurm.client import Result, SlurmTimeoutError

from .helpers import ReplayClient, recorded_jobs, recording

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def test_run_dir_for() -> None:
    cwd = Path("/work/proj")
    assert sub.run_dir_for("hpctrain-runs", "spiral", cwd, NOW, "abc123") == Path(
        "/work/proj/hpctrain-runs/spiral-20260102T030405Z-abc123")
    # Odd job names make tame directory names; absolute output dirs stay where they are.
    assert sub.run_dir_for("/scratch/runs", "my job; rm -rf", cwd, NOW, "x").name == \
        "my_job_rm_-rf-20260102T030405Z-x"
    assert sub.run_dir_for("../runs", "a", cwd, NOW, "x").parent == Path("/work/runs")
    assert sub.run_dir_for("~/runs", "a", cwd, NOW, "x").parent == Path.home() / "runs"
    assert sub.run_dir_for("r", "a", cwd, NOW) != sub.run_dir_for("r", "a", cwd, NOW)


def test_log_patterns_from_rendered_script() -> None:
    script = ('#SBATCH --output="/runs/a b/%x-%j.out"\n'
              "#SBATCH --error=/runs/x/%x-%j.err\n")
    assert sub.script_log_patterns(script) == ("/runs/a b/%x-%j.out", "/runs/x/%x-%j.err")
    assert sub.expand_log_pattern("/r/%x-%j.out", "12", "my %j job", "me") == \
        "/r/my %j job-12.out"
    assert sub.expand_log_pattern("/r/%u/%A-%%.log", "7", "n", "me") == "/r/me/7-%.log"


def test_git_state(tmp_path: Path) -> None:
    assert sub.git_state(tmp_path) is None  # not a repository
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    assert sub.git_state(tmp_path) is None  # no commit yet
    (tmp_path / "f").write_text("1")
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    state = sub.git_state(tmp_path)
    assert state is not None and len(state.commit) == 40 and not state.dirty
    (tmp_path / "untracked").write_text("x")
    assert sub.git_state(tmp_path).dirty is False
    (tmp_path / "f").write_text("2")
    assert sub.git_state(tmp_path).dirty is True


def _prepared(tmp_path: Path, config: Path | None = None) -> sub.Prepared:
    profile = load_profile("local")
    run_dir = sub.run_dir_for(profile.output_dir, "unit", tmp_path, NOW, "t0")
    plan = build_plan(JobRequest(profile=profile, job_name="unit", log_dir=str(run_dir),
                                 run_dir=str(run_dir), config=str(config) if config else None,
                                 command=() if config else ("true",)))
    return sub.Prepared(plan=plan, script=render_script(plan), run_dir=run_dir,
                        profile=profile, config=config, workdir=tmp_path)


def test_accepted_job_gets_run_dir_and_history_row(tmp_path: Path) -> None:
    config = tmp_path / "cfg.yaml"
    config.write_text("seed: 3\n")
    prep = _prepared(tmp_path, config)
    client = ReplayClient({"sbatch": recording("sbatch_parsable")})
    history = History(tmp_path / "h.sqlite3")
    done = sub.submit(prep, client, history)
    job_id = recorded_jobs()["completed"]
    assert done.job_id == job_id and client.calls == [
        ("sbatch", "--parsable", str(prep.run_dir / "job.sbatch"))]
    assert (prep.run_dir / "job.sbatch").read_text() == prep.script
    assert yaml.safe_load((prep.run_dir / "profile.yaml").read_text())["name"] == "local"
    assert (prep.run_dir / "config-snapshot.yaml").read_text() == "seed: 3\n"
    info = json.loads((prep.run_dir / "run.json").read_text())
    assert info["job_id"] == job_id and info["git"] is None
    assert done.stdout_path == str(prep.run_dir / f"unit-{job_id}.out")
    (row,) = history.all()
    assert row.job_id == job_id and row.run_dir == str(prep.run_dir)
    assert row.stdout_path == done.stdout_path and row.git_commit is None
    assert row.git_dirty is None
    assert done.as_dict(prep.plan)["follow"] == [f"hpctrain status {job_id}",
                                                 f"hpctrain logs -f {job_id}"]


def test_refused_job_leaves_nothing(tmp_path: Path) -> None:
    prep = _prepared(tmp_path)
    client = ReplayClient({"sbatch": recording("sbatch_refused")})
    history = History(tmp_path / "h.sqlite3")
    with pytest.raises(SlurmError, match="Node count specification invalid") as e:
        sub.submit(prep, client, history)
    assert "SLURM refused the job" in e.value.what
    assert not prep.run_dir.exists() and history.all() == []


def test_sbatch_timeout_keeps_the_run_dir_marked(tmp_path: Path) -> None:
    prep = _prepared(tmp_path)

    def hang(argv: tuple[str, ...]) -> Result:
        raise SlurmTimeoutError("sbatch did not answer within 10 s: SLURM is down or overloaded")

    history = History(tmp_path / "h.sqlite3")
    with pytest.raises(SlurmTimeoutError, match="may have been queued") as e:
        sub.submit(prep, ReplayClient({"sbatch": hang}), history)
    assert "squeue --me" in str(e.value.fix)
    assert (prep.run_dir / sub.UNCONFIRMED_NAME).is_file() and history.all() == []


def test_missing_config_is_refused_before_anything(tmp_path: Path) -> None:
    prep = _prepared(tmp_path, tmp_path / "nope.yaml")
    client = ReplayClient({"sbatch": recording("sbatch_parsable")})
    with pytest.raises(HpctrainError, match="does not exist"):
        sub.submit(prep, client, History(tmp_path / "h.sqlite3"))
    assert client.calls == [] and not prep.run_dir.exists()
