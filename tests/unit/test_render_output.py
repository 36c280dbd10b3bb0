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


def test_render_o_says_how_to_submit_so_that_hpctrain_follows_the_job(work: Path) -> None:
    res = _render(work, "-N", "2", "-t", "10", "-o", "job.sh", "--", "python", "train.py",
                  "-o", "out")
    assert res.returncode == 0, res.stderr
    # The job's own `-o out` stays; render's `-o job.sh` goes.
    assert ("plain `sbatch job.sh` is not in hpctrain's history" in res.stderr
            and "hpctrain submit -P local -N 2 -t 10 -- python train.py -o out" in res.stderr)
    # No dev cluster published here: no SLURM_CONF line.
    assert "SLURM_CONF" not in res.stderr


def test_render_o_names_the_dev_clusters_slurm_conf_for_plain_sbatch(work: Path) -> None:
    conf = work.parent / "dev cluster" / "slurm.conf"
    conf.parent.mkdir()
    conf.write_text("ClusterName=hpctrain-dev\n")
    state = work.parent / "home" / "state"
    state.mkdir(parents=True)
    (state / "slurm-conf").write_text(f"{conf}\n")
    res = _render(work, "-o", "job.sh")
    assert res.returncode == 0, res.stderr
    assert f"export SLURM_CONF='{conf}'" in res.stderr


@pytest.mark.parametrize(("args", "submit"), [
    (["render", "-P", "raven", "--output", "j.sh", "--force", "--", "python", "t.py"],
     "hpctrain submit -P raven -- python t.py"),
    (["--debug", "render", "-P", "local", "--output=j.sh", "--check", "python", "t.py", "--json"],
     "hpctrain submit -P local python t.py --json"),
    (["render", "-P", "local", "-e", "A=b c", "-o", "j.sh"], "hpctrain submit -P local -e 'A=b c'"),
    (["render", "--no-such-option"], None),
    (["submit", "-P", "local"], None),
])
def test_submit_line_keeps_the_jobs_options_and_drops_renders_own(
        args: list[str], submit: str | None) -> None:
    from hpctrain.cli.render import submit_line

    assert submit_line(args) == submit
