"""Runs longer than a time limit: the warning signal, requeue, chains and dependencies."""

from __future__ import annotations

import signal
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hpctrain.errors import PlanError
from hpctrain.plan import JobPlan, JobRequest, build_plan
from hpctrain.profiles import load_profile
from hpctrain.render.script import render_script
from tests.waits import wait_for


def plan(profile: str = "local", **kw: Any) -> JobPlan:
    return build_plan(JobRequest(profile=load_profile(profile), **kw))


def refused(profile: str = "local", **kw: Any) -> str:
    with pytest.raises(PlanError) as e:
        plan(profile, **kw)
    return str(e.value)


def test_trainer_jobs_get_the_profile_grace_and_requeue() -> None:
    p = plan("raven", nodes=2)
    assert p.grace_s == load_profile("raven").requeue.grace_s and p.requeue
    script = render_script(p)
    assert f"#SBATCH --signal=B:USR1@{p.grace_s}\n" in script
    assert "#SBATCH --requeue\n" in script and "#SBATCH --open-mode=append\n" in script
    assert 'scontrol requeue "$hpctrain_self"' in script


def test_grace_and_no_requeue_from_the_request() -> None:
    p = plan(time="10", grace_s=45, requeue=False)
    script = render_script(p)
    assert "#SBATCH --signal=B:USR1@45\n" in script and "#SBATCH --no-requeue\n" in script
    assert "scontrol requeue" not in script
    assert "stop-saved" in script  # a chain segment still stops cleanly and exits 0


def test_a_site_that_forbids_requeue_gets_a_note_not_a_requeue() -> None:
    profile = load_profile("local")
    forbidding = replace(profile, requeue=replace(profile.requeue, allowed=False))
    p = build_plan(JobRequest(profile=forbidding))
    assert not p.requeue and any("--chain" in n for n in p.notes)


def test_own_commands_get_no_signal_and_refuse_grace() -> None:
    p = plan(command=("python", "train.py"))
    assert p.grace_s is None and not p.requeue
    assert "--signal" not in render_script(p)
    assert "--grace applies to the packaged trainer" in refused(
        command=("python", "train.py"), grace_s=60)


@pytest.mark.parametrize(("grace", "time", "words"), [
    (5, "10", "give 10 to 3600 seconds"),
    (4000, "2-00:00:00", "give 10 to 3600 seconds"),
    (120, "2", "is not shorter than --time 00:02:00"),
    (60, "1", "is not shorter than --time 00:01:00"),
])
def test_impossible_grace_is_refused(grace: int, time: str, words: str) -> None:
    assert words in refused(grace_s=grace, time=time)


@pytest.mark.parametrize(("time", "grace"), [("1:30", 22), ("3:00", 45), ("2", 30), ("5", 75)])
def test_the_profiles_grace_shrinks_to_fit_a_short_job(time: str, grace: int) -> None:
    assert load_profile("local").requeue.grace_s == 180
    p = plan(time=time)
    assert p.grace_s == grace and f"#SBATCH --signal=B:USR1@{grace}\n" in render_script(p)
    assert any(n.startswith(f"--grace {grace}: the profile's 180 s is too long") for n in p.notes)


def test_a_long_job_keeps_the_profiles_grace_and_a_given_one_is_checked() -> None:
    p = plan(time="6")
    assert p.grace_s == 180 and not any("--grace" in n for n in p.notes)
    # The user's own grace is never shrunk: it is refused, with SLURM's time forms explained.
    why = refused(time="1:30", grace_s=180)
    assert "--grace 180 s is not shorter than --time 00:01:30" in why
    assert "use --grace 22" in why and "`1:30` 1 minute 30 seconds" in why


def test_time_help_explains_slurms_forms() -> None:
    from typer.testing import CliRunner

    from hpctrain.cli import app

    text = " ".join(CliRunner().invoke(app, ["submit", "--help"]).stdout.split())
    assert "`1:30` 1 minute 30 seconds" in text and "`2` is 2 minutes" in text
    assert "`1-00:00:00` a day" in text


@pytest.mark.parametrize("option", ["--signal=USR2@90", "--requeue", "--no-requeue",
                                    "--open-mode=truncate"])
def test_protocol_options_are_managed_for_the_trainer(option: str) -> None:
    assert "hpctrain sets it for the packaged trainer" in refused(sbatch_args=(option,))


def test_dependency_is_managed_for_everyone() -> None:
    message = refused(command=("true",), sbatch_args=("--dependency=afterok:1",))
    assert "--after JOBID or --chain N" in message


@pytest.mark.parametrize(("chain", "after", "words"), [
    (0, (), "--chain 0: give 1 to 100 segments"),
    (101, (), "--chain 101"),
    (1, ("12a",), "--after '12a'"),
    (1, ("1;rm -rf ~",), "give SLURM job ids"),
])
def test_bad_chains_and_dependencies(chain: int, after: tuple[str, ...], words: str) -> None:
    assert words in refused(chain=chain, after=after)


def test_chain_and_after_are_kept() -> None:
    p = plan(chain=4, after=("12", "13_2"))
    assert (p.chain, p.after) == (4, ("12", "13_2"))


def _start_script(tmp_path: Path, step: str, chain: int = 1) -> subprocess.Popen[str]:
    """The rendered script with stand-ins for srun and scontrol, in a throwaway run dir."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(f"#!/bin/bash\n{step}\n")
    (bin_dir / "scontrol").write_text(
        '#!/bin/bash\nif [ "$1" = requeue ]; then echo "requeue $2" >> "$CALLS"; '
        'else echo node1; fi\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    script = render_script(plan(time="10", grace_s=30, run_dir=str(tmp_path / "run"),
                                python_env=None, chain=chain))
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SLURM_JOB_ID": "77", "CALLS": str(
        tmp_path / "calls"), "SLURM_JOB_NODELIST": "node1", "HOME": str(tmp_path)}
    return subprocess.Popen(["bash", "-c", script], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _run_script(tmp_path: Path, step: str, warn: bool = False,
                chain: int = 1) -> tuple[int, str]:
    started = tmp_path / "step-started"
    if warn:
        # The script sets its USR1 trap before it starts any step: a started step shows the
        # trap is in place, so the warning cannot kill bash before it.
        step = f"touch '{started}'\n{step}"
    proc = _start_script(tmp_path, step, chain)
    if warn:
        wait_for(lambda: started.exists() or proc.poll() is not None, 60, "start of the job step")
        assert started.exists(), proc.communicate()
        # SLURM's --signal=B:USR1 reaches the batch shell only, not the job step.
        proc.send_signal(signal.SIGUSR1)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out + err


def test_script_requeues_after_a_warned_safe_stop(tmp_path: Path) -> None:
    # The step plays the trainer: it waits for the stop request, saves, and exits 75.
    step = ('while [ ! -e "$HPCTRAIN_RUN_DIR/stop-requested" ]; do sleep 0.05; done\n'
            'touch "$HPCTRAIN_RUN_DIR/stop-saved"; exit 75')
    rc, out = _run_script(tmp_path, step, warn=True)
    assert rc == 0, out
    assert (tmp_path / "calls").read_text() == "requeue 77\n"
    assert "requeueing job 77" in out
    assert (tmp_path / "run" / "stop-requested").read_text().startswith("USR1 ")


def test_script_does_not_requeue_a_stop_it_did_not_ask_for(tmp_path: Path) -> None:
    # A preemption or scancel reaches the trainer directly: it saves, but no requeue follows.
    step = 'touch "$HPCTRAIN_RUN_DIR/stop-saved"; exit 1'
    rc, out = _run_script(tmp_path, step)
    assert rc == 0 and not (tmp_path / "calls").exists()
    assert "checkpoint saved and stopped" in out


def test_script_passes_a_real_failure_through(tmp_path: Path) -> None:
    rc, _ = _run_script(tmp_path, "exit 3")
    assert rc == 3 and not (tmp_path / "calls").exists()


def test_a_chain_segment_skips_a_completed_run(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "training-complete").write_text("5 of 5\n")
    rc, out = _run_script(tmp_path, "exit 9", chain=3)
    assert rc == 0 and "nothing left to do" in out


def test_a_single_job_trains_on_after_a_completed_run(tmp_path: Path) -> None:
    # A resubmit with a higher --max-epochs into the same run directory must train.
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "training-complete").write_text("5 of 5\n")
    rc, out = _run_script(tmp_path, "exit 9")
    assert rc == 9 and "nothing left to do" not in out
