"""One answer per question (issue 30): no error that contradicts itself, no suggestion said
twice, nothing left behind by a command that failed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpctrain.errors import PlanError
from hpctrain.places import LocalPlace
from hpctrain.plan import JobRequest, build_plan
from hpctrain.profiles import load_profile
from hpctrain.values.rundir import RunFile


def _refused(**kw: object) -> str:
    with pytest.raises(PlanError) as e:
        build_plan(JobRequest(profile=load_profile("raven"), **kw))  # type: ignore[arg-type]
    return str(e.value)


@pytest.mark.parametrize(("args", "answer"), [
    # Past the partition's 80 nodes per job, though 192 nodes would fit.
    ({"nodes": 200}, "partition gpu allows at most 80 node(s) per job - --nodes 80 is accepted"),
    # gpu-bw: 32 such nodes, at most 16 per job; 70 nodes are nearer without the constraint.
    ({"nodes": 70, "constraint": "gpu-bw"}, "only 16 node(s) per job with --constraint gpu-bw - "
     "without --constraint is accepted (70 node(s)"),
    ({"nodes": 17, "constraint": "gpu-bw"}, "- --nodes 16 is accepted"),
])
def test_too_many_nodes_get_one_count_to_use(args: dict[str, object], answer: str) -> None:
    why = _refused(**args)
    # One count to use, in the fix alone (the refusal says the limit).
    assert answer in why and why.count("--nodes") == (0 if "without" in answer else 1), why


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
    env["HPCTRAIN_HOME"] = str(cwd / "home")
    return subprocess.run([sys.executable, "-m", "hpctrain", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_a_mistyped_command_gets_one_suggestion(tmp_path: Path) -> None:
    res = _run("rendr", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("Did you mean") == 1, res.stderr
    assert "'render'" in res.stderr


def test_cancel_all_with_nothing_unfinished_asks_no_slurm(tmp_path: Path) -> None:
    # Whether or not a slurm.conf is readable: an empty history has nothing to cancel.
    res = _run("cancel", "--all", cwd=tmp_path)
    assert res.returncode == 0 and "No unfinished jobs to cancel." in res.stderr, res.stderr


def test_a_discarded_run_takes_the_runs_folder_it_made(tmp_path: Path) -> None:
    place = LocalPlace(workdir=tmp_path)
    run_dir = tmp_path / "runs" / "a" / "job-1"
    place.create_run_dir(run_dir, [RunFile(run_dir / "job.sbatch", "#!/bin/bash\n")])
    (tmp_path / "runs" / "a" / ".snapshots" / "trees").mkdir(parents=True)
    place.discard(run_dir)
    assert not (tmp_path / "runs").exists()
    # A runs folder that was there before, or holds another run, stays.
    kept = tmp_path / "kept"
    (kept / "other-run").mkdir(parents=True)
    place.create_run_dir(kept / "job-2", [])
    place.discard(kept / "job-2")
    assert sorted(p.name for p in kept.iterdir()) == ["other-run"]
