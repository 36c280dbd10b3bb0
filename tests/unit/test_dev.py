"""`hpctrain dev`'s pure parts: the dev plan, its script, the dev-run's plan, the shell's argv,
`submit --like-dev`'s request (docs/dev.md)."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from hpctrain.plan import JobRequest, build_plan
from hpctrain.plan.dev import batch_request, dev_warning_s
from hpctrain.profiles import load_profile
from hpctrain.render.script import render_script
from hpctrain.slurm.interactive import shell_argv
from hpctrain.submission.dev import run_plan
from hpctrain.values.rundir import RunDir


def _request(**kw: object) -> JobRequest:
    return JobRequest(profile=load_profile("local"), nodes=2, time="10", run_dir="/r/dev",
                      **kw)  # type: ignore[arg-type]


def test_a_dev_plan_is_the_batch_plan_without_what_only_a_launch_needs() -> None:
    batch = build_plan(_request())
    dev = build_plan(_request(dev=True))
    assert (batch.grace_s, batch.stall_window, batch.restarts) != (None, "off", 0)
    assert (dev.grace_s, dev.stall_window, dev.restarts, dev.retries) == (None, "off", 0, 0)
    # The monitor samples a dev job as any other; its stall watch would cancel a quiet shell.
    assert dev.monitor_interval_s == batch.monitor_interval_s is not None
    assert dev.dev_idle_s == 3600 and batch.dev_idle_s is None
    same = ("partition", "nodes", "gpus_per_node", "cpus_per_task", "mem_mb", "time_seconds",
            "env", "nccl", "modules", "python_env", "launcher")
    assert [getattr(dev, f) for f in same] == [getattr(batch, f) for f in same]


@pytest.mark.parametrize("launcher", ["srun", "torchrun", "per-node"])
def test_the_dev_script_writes_the_shell_environment_and_launches_nothing(
        launcher: str, tmp_path: Path) -> None:
    text = render_script(build_plan(_request(dev=True, launcher=launcher)))
    path = tmp_path / "dev.sbatch"
    path.write_text(text)
    subprocess.run(["bash", "-n", str(path)], check=True)
    assert "--kill-on-bad-exit=1" not in text and "--requeue" not in text
    # A 10-minute dev job is warned 150 s before its limit, by the shell's terminal.
    assert "#SBATCH --signal=B:USR1@150\n" in text and "trap hpctrain_dev_warn USR1" in text
    assert "dev-env.sh" in text and "dev-shell.rc" in text
    assert "python -m hpctrain.monitor sample" in text and "HPCTRAIN_STALL_WINDOW=off" in text
    # The monitor's own step keeps no dev job from its idle end.
    assert "*:hpctrain-monitor) ;;" in text
    # The batch script's environment section is the dev script's, line for line.
    batch = render_script(build_plan(_request(launcher=launcher)))
    assert _environment(text) == _environment(batch)


def test_the_dev_warning_comes_at_most_5_minutes_and_at_least_a_minute_before() -> None:
    assert [dev_warning_s(t) for t in (60, 600, 3600, 86400)] == [60, 150, 300, 300]


def _environment(script: str) -> str:
    return script.split("set -eo pipefail")[1].split("hpctrain_mark \"job started\"")[0]


def test_a_dev_run_is_the_batch_launch_into_its_own_directory() -> None:
    req = _request(dev=True)
    plan = run_plan(req, ("python", "train.py"), RunDir("/r/dev").dev_run(2).root)
    assert plan.command == ("python", "train.py") and plan.dev_idle_s is None
    assert plan.run_dir == "/r/dev/dev-runs/002" and plan.code_dir is None
    assert (plan.grace_s, plan.monitor_interval_s, plan.restarts) == (None, None, 0)
    text = render_script(plan)
    assert "srun --kill-on-bad-exit=1" in text and "train.py" in text
    trainer = run_plan(req, (), Path("/r/dev/dev-runs/001"))
    assert "hpctrain.trainer" in " ".join(trainer.command)


def test_like_dev_is_the_same_request_as_a_batch_job_on_a_snapshot() -> None:
    dev = _request(dev=True, snapshot=False, env={"A": "1"})
    batch = batch_request(dev)
    assert not batch.dev and batch.snapshot and batch.env == {"A": "1"}
    assert dataclasses.replace(batch, dev=True, snapshot=False) == dev


def test_the_shell_is_one_overlapping_step_with_the_terminal_only() -> None:
    argv = shell_argv("42", Path("/r/dev/dev-shell.rc"), bash="/bin/bash")
    assert argv[:4] == ("srun", "--jobid=42", "--overlap", "--pty")
    assert "--export=TERM" in argv and argv[-3:] == ("--rcfile", "/r/dev/dev-shell.rc", "-i")
