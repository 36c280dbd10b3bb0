"""sbatch users' spellings (-p, -N, -t, -A, -J, --gpus N), hints for the options hpctrain does
not take, and shell completion (issue 30, point 10)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpctrain.errors import HpctrainError
from hpctrain.history import History
from hpctrain.plan import JobRequest
from hpctrain.plan.gpus import with_total_gpus
from hpctrain.profiles import load_profile
from tests.jobs.helpers import hpctrain, track


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HPCTRAIN_HOME": str(tmp_path / "home")}


def _raven(**kw: int) -> JobRequest:
    return JobRequest(profile=load_profile("raven"), command=("python", "t.py"), **kw)


def _layout(req: JobRequest) -> tuple[int, int | None]:
    return req.nodes, req.gpus_per_node


def test_total_gpus_fit_one_node_or_fill_full_nodes() -> None:
    assert _layout(with_total_gpus(_raven(), 2, nodes_given=False)) == (1, 2)
    assert _layout(with_total_gpus(_raven(), 4, nodes_given=False)) == (1, 4)
    assert _layout(with_total_gpus(_raven(), 8, nodes_given=False)) == (2, 4)
    assert _layout(with_total_gpus(_raven(nodes=4), 16, nodes_given=True)) == (4, 4)
    assert _layout(with_total_gpus(_raven(gpus_per_node=4), 12, nodes_given=False)) == (3, 4)


@pytest.mark.parametrize(("total", "kw", "fix"), [
    (6, {}, "--gpus 8 (2 node(s) x 4 GPU(s)) or --gpus 4 (1 node(s) x 4 GPU(s)) is accepted"),
    (3, {}, "--gpus 4 (1 node(s) x 4 GPU(s)) or --gpus 2 (1 node(s) x 2 GPU(s)) is accepted"),
    (8, {"nodes": 4}, "--gpus 16 (4 node(s) x 4 GPU(s)) is accepted"),
    (8, {"gpus_per_node": 3}, "no GPU count near it is accepted; see hpctrain profiles show "
                              "raven"),
])
def test_total_gpus_that_do_not_map_are_refused_with_accepted_totals(
        total: int, kw: dict[str, int], fix: str) -> None:
    """The fix names totals the profile accepts (the old one named layouts it refused)."""
    with pytest.raises(HpctrainError) as e:
        with_total_gpus(_raven(**kw), total, nodes_given="nodes" in kw)
    assert f"--gpus {total}" in e.value.what and "partition gpu" in e.value.what
    assert e.value.fix == fix


def _sbatch_lines(r: subprocess.CompletedProcess[str]) -> set[str]:
    assert r.returncode == 0, r.stderr
    return {line for line in r.stdout.splitlines() if line.startswith("#SBATCH")}


def test_render_takes_sbatch_spellings(env: dict[str, str], tmp_path: Path) -> None:
    lines = _sbatch_lines(hpctrain(
        "render", "-P", "gilbreth", "-p", "a100-80gb", "--gpus", "4", "-t", "4:00:00",
        "-A", "lab", "-J", "name", env=env, cwd=tmp_path))
    assert {"#SBATCH --partition=a100-80gb", "#SBATCH --nodes=1", "#SBATCH --gpus-per-node=4",
            "#SBATCH --time=04:00:00", "#SBATCH --account=lab",
            "#SBATCH --job-name=name"} <= lines
    lines = _sbatch_lines(hpctrain("render", "-P", "raven", "--gpus", "8", "-N", "2",
                                   env=env, cwd=tmp_path))
    assert {"#SBATCH --nodes=2", "#SBATCH --gres=gpu:a100:4"} <= lines


def test_render_splits_gpus_into_the_fewest_nodes_the_profile_takes(
        env: dict[str, str], tmp_path: Path) -> None:
    """--gpus 6 on 4-GPU nodes that take any count: two nodes of three, as sbatch would."""
    lines = _sbatch_lines(hpctrain("render", "-P", "gilbreth", "-A", "lab", "-p", "a100-80gb",
                                   "--gpus", "6", env=env, cwd=tmp_path))
    assert {"#SBATCH --nodes=2", "#SBATCH --gpus-per-node=3"} <= lines


def test_render_refuses_gpus_that_do_not_map(env: dict[str, str], tmp_path: Path) -> None:
    r = hpctrain("render", "-P", "raven", "--gpus", "6", env=env, cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "--gpus 6" in r.stderr and "Fix: --gpus 8 (2 node(s) x 4 GPU(s)) or --gpus 4" \
        in r.stderr


def test_submit_and_sweep_take_total_gpus(env: dict[str, str], tmp_path: Path) -> None:
    for argv in (("submit", "-P", "raven", "--gpus", "8", "--dry-run"),
                 ("sweep", "-P", "raven", "--gpus", "8", "--grid", "optim.lr=0.1,0.2",
                  "--dry-run")):
        lines = _sbatch_lines(hpctrain(*argv, env=env, cwd=tmp_path))
        assert {"#SBATCH --nodes=2", "#SBATCH --gres=gpu:a100:4"} <= lines, argv


@pytest.mark.parametrize(("argv", "fix"), [
    (("render", "-P", "raven", "--mail-type=END"),
     "see `hpctrain render --help`; an sbatch option reaches sbatch as "
     "--sbatch-arg=--mail-type=END"),
    (("render", "-P", "raven", "--gres", "gpu:4"),
     "Fix: hpctrain's spelling: --gpus-per-node 4 (hpctrain writes"),
    (("submit", "-P", "raven", "-c", "8"), "Fix: hpctrain's spelling: --cpus-per-task 8\n"),
    (("status", "--mail-type", "END"), "Fix: see `hpctrain status --help`\n"),
])
def test_unknown_option_suggests_the_hpctrain_spelling(
        env: dict[str, str], tmp_path: Path, argv: tuple[str, ...], fix: str) -> None:
    r = hpctrain(*argv, env=env, cwd=tmp_path)
    assert r.returncode == 2 and "No such option" in r.stderr
    assert fix in r.stderr, r.stderr


def test_completion_prints_each_shells_script(env: dict[str, str], tmp_path: Path) -> None:
    for shell, marker in (("bash", "complete_bash"), ("zsh", "complete_zsh"),
                          ("fish", "complete_fish")):
        r = hpctrain("completion", shell, env=env, cwd=tmp_path)
        assert r.returncode == 0 and "_HPCTRAIN_COMPLETE" in r.stdout and marker in r.stdout
    bad = hpctrain("completion", "tcsh", env=env, cwd=tmp_path)
    assert bad.returncode == 1 and "Fix: choose bash, zsh, fish" in bad.stderr


def _bash_complete(env: dict[str, str], cwd: Path, line: str) -> list[str]:
    """What bash's completion function gets for `line` (completing its last word)."""
    words = line.split(" ")
    r = subprocess.run(
        [sys.executable, "-m", "hpctrain"], capture_output=True, text=True, cwd=cwd, timeout=60,
        env={**env, "_HPCTRAIN_COMPLETE": "complete_bash", "COMP_WORDS": line,
             "COMP_CWORD": str(len(words) - 1)}, check=False)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def test_bash_completes_profiles_partitions_and_job_ids(
        env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _bash_complete(env, tmp_path, "hpctrain render --profile gil") == ["gilbreth"]
    assert _bash_complete(env, tmp_path, "hpctrain submit -P raven --partition ") == \
        ["gpu", "gpudev"]
    # No profile chosen: every profile's partitions.
    assert "a100-80gb" in _bash_complete(env, tmp_path, "hpctrain render -p a")
    assert "status" in _bash_complete(env, tmp_path, "hpctrain sta")
    monkeypatch.setenv("HPCTRAIN_HOME", env["HPCTRAIN_HOME"])
    track(History(), "4242", "4243", "5150")
    for command in ("status", "logs", "cancel", "why"):
        assert _bash_complete(env, tmp_path, f"hpctrain {command} 42") == ["4243", "4242"]
