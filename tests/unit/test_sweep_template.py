"""A sweep of the user's own command with `{KEY}` placeholders: each point's values where the
script wants them (`--lr {optim.lr}`), one argument each, never read by a shell; no Hydra-style
arguments appended. The array script is rendered, its run directory made, and its launch run
with an srun that runs the command here: an argparse script reports what it was given."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hpctrain.errors import HpctrainError
from hpctrain.places import LocalPlace
from hpctrain.plan import JobRequest
from hpctrain.plan import sweep as points_of
from hpctrain.plan.sweep import Sweep
from hpctrain.profiles import load_profile
from hpctrain.submission.submit import create_run_dir
from hpctrain.submission.sweep import SweepPlan, point_args, prepare_sweep

TRAIN_PY = """\
import argparse, json, os, sys
p = argparse.ArgumentParser()
p.add_argument("--lr", type=float, required=True)
p.add_argument("--tag", required=True)
p.add_argument("--note", default="")
args = p.parse_args()
with open(os.path.join(os.environ["HPCTRAIN_RUN_DIR"], "args.json"), "w") as f:
    json.dump({"args": vars(args), "argv": sys.argv[1:]}, f)
"""
# Hostile values: a shell that read them would run `touch` or split them.
TAGS = ["$(touch {m})", "a b; touch {m}", "-x", "it's \"quoted\"", "`touch {m}`"]
COMMAND = ("python", "train.py", "--lr", "{optim.lr}", "--tag={tag}", "--note",
           "{{literal}} ${HOME}")


def _sweep(marker: Path) -> Sweep:
    points = tuple((("optim.lr", f"0.{n + 1}"), ("tag", t.format(m=marker)))
                   for n, t in enumerate(TAGS))
    return Sweep("list", points, ("optim.lr", "tag"))


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_placeholders_fill_the_command_and_nothing_is_appended(tmp_path: Path) -> None:
    req = JobRequest(profile=load_profile("local"), command=COMMAND)
    point = (("optim.lr", "0.1"), ("tag", "a b"))
    assert points_of.placeholders(COMMAND) == ("optim.lr", "tag")
    assert point_args(req, point) == ("0.1", "--tag=a b", "--note", "{literal} ${HOME}")
    # Without a placeholder: Hydra-style, as before.
    plain = dataclasses.replace(req, command=("python", "train.py"))
    assert point_args(plain, point) == ("optim.lr=0.1", "tag=a b")


@pytest.mark.parametrize(("command", "words"), [
    (("python", "t.py", "--lr", "{optim.lrr}"),
     ["{optim.lrr}", "its keys: {optim.lr}, {tag}"]),
    (("{tag}", "t.py"), ["the program", "holds a placeholder"]),
    (("python", "t.py", "--lr", "{optim.lr}", "a\nb"), ["line break"]),
])
def test_a_placeholder_no_point_can_fill_is_refused(command: tuple[str, ...],
                                                    words: list[str]) -> None:
    sweep = Sweep("grid", ((("optim.lr", "0.1"), ("tag", "x")),), ("optim.lr", "tag"))
    with pytest.raises(HpctrainError) as e:
        points_of.check_placeholders(command, sweep)
    for w in words:
        assert w in str(e.value.what), e.value.what
    assert e.value.fix


def test_a_point_without_the_placeholder_s_key_is_named() -> None:
    sweep = Sweep("list", ((("optim.lr", "0.1"),), (("tag", "x"),)), ("optim.lr", "tag"))
    with pytest.raises(HpctrainError, match="point 1 has no value for optim.lr"):
        points_of.check_placeholders(("python", "t.py", "{optim.lr}"), sweep)


def test_the_array_script_runs_each_point_with_its_own_arguments(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    project = tmp_path / "my project"
    project.mkdir()
    (project / "train.py").write_text(TRAIN_PY)
    req = JobRequest(profile=load_profile("local"), command=COMMAND, python_env=sys.prefix,
                     job_name="sweep", invocation="test", monitor_interval_s=None)
    place = LocalPlace(workdir=project)
    prep = prepare_sweep(SweepPlan(req, _sweep(marker), max_array_size=100), place)
    script = prep.arrays[0].script
    assert "{optim.lr}" not in script and 'train.py --lr "${hpctrain_point_args[@]}"' in script
    create_run_dir(dataclasses.replace(prep.arrays[0], files=prep.files), place)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # srun: its options dropped, the launcher's wrapper run as one task of one.
    _stub(bin_dir / "srun", 'while [[ "$1" == --* ]]; do shift; done\n'
                            "SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NTASKS=1 exec \"$@\"\n")
    _stub(bin_dir / "scontrol", 'echo node1\n')
    for task, tag in enumerate(TAGS):
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path),
               "SLURM_JOB_ID": str(40 + task), "SLURM_ARRAY_JOB_ID": "40",
               "SLURM_ARRAY_TASK_ID": str(task), "SLURM_JOB_NODELIST": "node1"}
        proc = subprocess.run(["bash", str(prep.arrays[0].script_path)], cwd=tmp_path,
                              env=env, capture_output=True, text=True, timeout=60,
                              check=False)
        assert proc.returncode == 0, proc.stderr
        got = json.loads((prep.point_dir(task) / "args.json").read_text())
        assert got["args"] == {"lr": float(f"0.{task + 1}"), "tag": tag.format(m=marker),
                               "note": "{literal} ${HOME}"}
        # Exactly the command's arguments: nothing Hydra-style after them.
        assert got["argv"] == ["--lr", f"0.{task + 1}", f"--tag={tag.format(m=marker)}",
                               "--note", "{literal} ${HOME}"]
    assert not marker.exists() and not os.path.exists(tmp_path / "PWNED")
