"""Each option of `hpctrain render` changes the script the way docs/commands.md's table says.

The script is render's product, so its lines are the effect; tests/options/test_submit_options.py
checks what the same options do in a real job.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpctrain.cli import app

runner = CliRunner()


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def _script(args: list[str]) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    subprocess.run(["bash", "-n"], input=res.stdout, text=True, check=True)
    return res.stdout


def _sbatch(script: str) -> dict[str, str]:
    """The #SBATCH options: name -> value ('' for a bare flag)."""
    lines = [ln.removeprefix("#SBATCH ") for ln in script.splitlines()
             if ln.startswith("#SBATCH ")]
    return dict((ln.split("=", 1) + [""])[:2] for ln in lines)


def _launch(script: str) -> str:
    """The launch line (with its continuation lines) of the job's step."""
    lines = script.splitlines()
    # The launch line, with the in-job supervisor in front of it or not.
    start = next(i for i, ln in enumerate(lines) if "srun --kill-on-bad-exit=1" in ln
                 and not ln.startswith("#"))
    end = next(i for i in range(start, len(lines)) if not lines[i].endswith("\\"))
    return " ".join(lines[start:end + 1])


def _refused(args: list[str]) -> str:
    """The refusal (in process, the error boundary's message is the exception's)."""
    res = runner.invoke(app, args)
    assert res.exit_code == 1 and res.exception is not None, res.output
    return str(res.exception)


def test_time_job_name_qos_cpus_reach_the_header() -> None:
    header = _sbatch(_script(["render", "-P", "local", "--time", "90", "--job-name", "optjob",
                              "--qos", "normal", "--cpus-per-task", "1", "--dry-run"]))
    assert header["--time"] == "01:30:00"
    assert header["--job-name"] == "optjob"
    assert header["--qos"] == "normal"
    assert header["--cpus-per-task"] == "1"
    assert header["--output"] == "hpctrain-runs/%x-%j.out"  # %x: the job name above
    short = _sbatch(_script(["render", "-P", "local", "-t", "1:45:00", "-J", "other",
                             "--dry-run"]))
    assert short["--time"] == "01:45:00" and short["--job-name"] == "other"
    assert "--qos" not in short


def test_time_over_the_partition_limit_is_refused() -> None:
    out = _refused(["render", "-P", "local", "--time", "3:00:00", "--dry-run"])
    assert "--time 03:00:00 is over the limit of partition debug (02:00:00)" in out, out


def test_launcher_torchrun_is_one_task_per_node_spawning_the_gpus() -> None:
    srun = _script(["render", "-P", "local", "--nodes", "2", "--gpus-per-node", "2",
                    "--launcher", "srun", "--dry-run"])
    torchrun = _script(["render", "-P", "local", "--nodes", "2", "--gpus-per-node", "2",
                        "--launcher", "torchrun", "--dry-run"])
    assert _sbatch(srun)["--ntasks-per-node"] == "2"
    assert "torchrun" not in _launch(srun)
    assert _sbatch(torchrun)["--ntasks-per-node"] == "1"
    launch = _launch(torchrun)
    assert " torchrun " in launch and "--nproc-per-node=2" in launch and "--nnodes=" in launch


def test_launcher_lightning_is_the_earlier_name_of_srun() -> None:
    args = ["render", "-P", "local", "--nodes", "2", "--dry-run"]
    def body(launcher: str) -> list[str]:
        script = _script([*args, "--launcher", launcher])
        return [ln for ln in script.splitlines() if not ln.startswith("# Made by:")]

    assert body("lightning") == body("srun")


def test_launcher_per_node_is_one_task_per_node_with_all_its_gpus() -> None:
    per_node = _script(["render", "-P", "local", "--nodes", "2", "--gpus-per-node", "2",
                        "--launcher", "per-node", "--dry-run", "--", "python", "spawn.py"])
    assert _sbatch(per_node)["--ntasks-per-node"] == "1"
    assert _sbatch(per_node)["--gres"] == "gpu:emu:2"
    assert "hpctrain-per-node python spawn.py" in _launch(per_node)


def test_grace_and_requeue_set_the_warning_and_the_requeue() -> None:
    on = _script(["render", "-P", "local", "--time", "10", "--grace", "45", "--requeue",
                  "--dry-run"])
    assert _sbatch(on)["--signal"] == "B:USR1@45"
    assert "--requeue" in _sbatch(on) and 'scontrol requeue "$hpctrain_self"' in on
    off = _script(["render", "-P", "local", "--time", "10", "--grace", "45", "--no-requeue",
                   "--dry-run"])
    assert "--no-requeue" in _sbatch(off) and "--requeue" not in _sbatch(off)
    assert "scontrol requeue" not in off
    # The warning comes before the limit or not at all.
    out = _refused(["render", "-P", "local", "--time", "1", "--grace", "60", "--dry-run"])
    assert "--grace 60 s is not shorter than --time" in out, out


def test_config_is_passed_to_the_packaged_trainer(tmp_path: Path) -> None:
    config = tmp_path / "my config.yaml"
    config.write_text("trainer:\n  max_epochs: 3\n")
    launch = _launch(_script(["render", "-P", "local", "--config", str(config), "--dry-run"]))
    assert "-m hpctrain.trainer" in launch
    # The file's settings are written into the command: a later edit cannot change the job.
    assert "--task spiral --set trainer.max_epochs=3" in launch
    assert "--config" not in launch


def test_global_batch_and_max_device_batch_reach_the_trainer() -> None:
    # 2 nodes x 2 GPUs = 4 ranks: 64 samples per step split as 16 per rank.
    launch = _launch(_script(["render", "-P", "local", "--nodes", "2", "--global-batch", "64",
                              "--max-device-batch", "8", "--dry-run"]))
    assert "--set trainer.global_batch=64 --set trainer.max_device_batch=8" in launch
    # 6 does not split over 4 ranks: refused before the queue, naming a size that does.
    out = _refused(["render", "-P", "local", "--nodes", "2", "--global-batch", "6",
                    "--dry-run"])
    assert "cannot be split over 4 device(s)" in out and "use a global batch of 4 or 8" in out
    out = _refused(["render", "-P", "local", "--nodes", "2", "--max-device-batch", "8",
                    "--dry-run"])
    assert "--max-device-batch needs --global-batch N" in out, out


def test_python_env_is_activated_or_left_out(tmp_path: Path) -> None:
    env = tmp_path / "my env"
    script = _script(["render", "-P", "local", "--python-env", str(env), "--dry-run"])
    assert f". '{env}/bin/activate'" in script
    none = _script(["render", "-P", "local", "--python-env", "none", "--dry-run"])
    assert "/bin/activate" not in none


def test_monitor_interval_and_monitor_switch() -> None:
    on = _script(["render", "-P", "local", "--monitor", "--monitor-interval", "7", "--dry-run"])
    assert "python -m hpctrain.monitor sample" in on and "--interval 7 &" in on
    off = _script(["render", "-P", "local", "--no-monitor", "--dry-run"])
    assert "hpctrain.monitor" not in off
