"""A runs folder a submit makes is left out of the user's git repository (newcomer review
2026-11-29, 18: `hpctrain-runs/` showed as untracked, and `git add .` would commit it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hpctrain.places import LocalPlace
from hpctrain.places.base import RUNS_GITIGNORE
from hpctrain.values.rundir import RunFile


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="no git here")
def test_the_runs_folder_a_submit_makes_is_ignored_by_git(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "train.py").write_text("print('hi')\n")
    place = LocalPlace(workdir=tmp_path)
    runs = tmp_path / "hpctrain-runs"
    run_dir = runs / "job-1"
    place.create_run_dir(run_dir, [RunFile(run_dir / "job.sbatch", "#!/bin/bash\n")])
    assert (runs / RUNS_GITIGNORE).read_text() == "*\n"
    assert _git(tmp_path, "status", "--porcelain", "--untracked-files=all") == "?? train.py\n"
    _git(tmp_path, "add", ".")
    assert _git(tmp_path, "diff", "--cached", "--name-only") == "train.py\n"
    # The next run goes beside it; the file is written once, by the submit that made the folder.
    (runs / RUNS_GITIGNORE).write_text("*\n# kept as the user left it\n")
    place.create_run_dir(runs / "job-2", [])
    assert (runs / RUNS_GITIGNORE).read_text().endswith("as the user left it\n")


def test_a_folder_that_existed_gets_no_gitignore_and_a_failed_submit_leaves_nothing(
    tmp_path: Path,
) -> None:
    place = LocalPlace(workdir=tmp_path)
    mine = tmp_path / "results"
    mine.mkdir()
    place.create_run_dir(mine / "job-1", [])
    assert not (mine / RUNS_GITIGNORE).exists()
    # A submit that fails after making the folder takes the folder, .gitignore and all.
    run_dir = tmp_path / "hpctrain-runs" / "job-2"
    place.create_run_dir(run_dir, [RunFile(run_dir / "job.sbatch", "#!/bin/bash\n")])
    (run_dir.parent / ".snapshots").mkdir()
    place.discard(run_dir)
    assert not (tmp_path / "hpctrain-runs").exists()
