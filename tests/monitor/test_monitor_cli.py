"""`hpctrain stats`, `scale`, `scale-report` and the monitor in rendered scripts, no cluster."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpctrain.cli import app

RECORDED = Path(__file__).parent / "recorded"
runner = CliRunner()


@pytest.fixture(autouse=True)
def _empty_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No history: the subprocesses and the in-process app both see an empty one."""
    for key, value in (("HPCTRAIN_HOME", tmp_path / "home"), ("SLURM_CONF", tmp_path / "no")):
        monkeypatch.setenv(key, str(value))
    monkeypatch.chdir(tmp_path)


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run dir; $(x)"
    (run / "monitor").mkdir(parents=True)
    for name in ("node1", "node2"):
        shutil.copy(RECORDED / f"devcluster-{name}.jsonl", run / "monitor" / f"{name}.jsonl")
    return run


def test_stats_of_a_run_directory(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    res = runner.invoke(app, ["stats", str(run), "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert [n["node"] for n in data["nodes"]] == ["node1", "node2"] and data["samples"] == 4
    text = runner.invoke(app, ["stats", str(run)])
    assert text.exit_code == 0 and "node2" in text.stdout and "no GPU readings" in text.stdout


@pytest.mark.parametrize("args", [["stats", "4242"], ["stats"], ["scale-report"],
                                  ["scale-report", "no-such-study"]])
def test_unknown_jobs_and_studies_are_clear_errors(args: list[str]) -> None:
    res = subprocess.run([sys.executable, "-m", "hpctrain", *args], capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 1 and res.stderr.startswith("Error: "), res.stderr
    assert "Traceback" not in res.stderr and "Fix:" in res.stderr


def test_stats_of_a_run_without_samples_says_why(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    res = subprocess.run([sys.executable, "-m", "hpctrain", "stats", str(tmp_path / "empty")],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 1 and "no monitor samples" in res.stderr and "--no-monitor" in \
        res.stderr


@pytest.mark.parametrize("args, message", [
    (["--topologies", "1x1,2x0"], "2x0 is out of range"),
    (["--topologies", "1x1,1x2,2x2", "--strong", "--batch-size", "6"], "does not divide"),
    (["--topologies", "1x1", "--set", "trainer.batch_size=0"], "batch_size"),
])
def test_scale_refuses_bad_studies_before_submitting(args: list[str], message: str) -> None:
    res = subprocess.run([sys.executable, "-m", "hpctrain", "scale", "--profile", "local", *args],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 1 and message in res.stderr and "Traceback" not in res.stderr


def test_every_rendered_job_runs_the_monitor_on_every_node() -> None:
    for extra in ([], ["--", "python", "train.py"], ["--launcher", "torchrun"]):
        res = runner.invoke(app, ["render", "--profile", "local", "--nodes", "2", *extra])
        assert res.exit_code == 0, res.output
        script = res.stdout
        assert 'srun --overlap --nodes="$SLURM_JOB_NUM_NODES"' in script
        assert "--ntasks-per-node=1 --cpus-per-task=1" in script
        assert "python -m hpctrain.monitor sample" in script
        assert script.index("hpctrain.monitor sample") < script.rindex("srun --kill-on-bad-exit")


def test_monitor_interval_and_no_monitor() -> None:
    res = runner.invoke(app, ["render", "--profile", "local", "--monitor-interval", "3"])
    assert res.exit_code == 0 and "--interval 3 &" in res.stdout
    res = runner.invoke(app, ["render", "--profile", "local", "--no-monitor"])
    assert res.exit_code == 0 and "hpctrain.monitor" not in res.stdout
    res = runner.invoke(app, ["render", "--profile", "local", "--monitor-interval", "0"])
    assert res.exit_code != 0
