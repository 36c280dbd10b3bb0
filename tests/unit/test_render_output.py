"""`render -o FILE` writes a script plain sbatch can run: its log directory absolute and made;
`-o -` is stdout; a script on stdout says what to create before sbatch."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "my project; $(x)"
    path.mkdir()
    return path


def _render(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HPCTRAIN_HOME": str(cwd.parent / "home")}
    return subprocess.run([sys.executable, "-m", "hpctrain", "render", "-P", "local", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def _sbatch_value(script: str, option: str) -> str:
    match = re.search(rf"^#SBATCH --{option}=(.*)$", script, re.MULTILINE)
    assert match, script
    return match.group(1)


def test_render_o_names_the_log_dir_absolutely_and_makes_it(work: Path) -> None:
    (work / "scripts").mkdir()
    res = _render(work, "-o", "scripts/job.sh")
    assert res.returncode == 0, res.stderr
    script = (work / "scripts" / "job.sh").read_text()
    logs = work / "hpctrain-runs"
    assert logs.is_dir() and f"the job logs into {logs}/" in res.stderr
    # sbatch's quoting of #SBATCH values: the path holds a space, so it is "..." quoted.
    assert _sbatch_value(script, "output") == f'"{logs}/%x-%j.out"'
    assert _sbatch_value(script, "error") == f'"{logs}/%x-%j.err"'
    subprocess.run(["bash", "-n", str(work / "scripts" / "job.sh")], check=True)


def test_render_o_dash_is_stdout(work: Path) -> None:
    res = _render(work, "-o", "-")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("#!/bin/bash\n") and not (work / "-").exists()
    assert _sbatch_value(res.stdout, "output") == "hpctrain-runs/%x-%j.out"


def test_a_script_on_stdout_says_to_make_its_log_dir(work: Path) -> None:
    res = _render(work)
    assert res.returncode == 0, res.stderr
    assert "mkdir -p hpctrain-runs" in res.stderr and "-o FILE" in res.stderr
    assert not (work / "hpctrain-runs").exists()
    (work / "hpctrain-runs").mkdir()
    assert "mkdir -p" not in _render(work).stderr
