"""The safe stop with two real DDP ranks (gloo on the CPU), under srun's layout and torchrun."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from hpctrain import rundir
from hpctrain.trainer.signals import EXIT_REQUEUE

from .helpers import ONE_BATCH_PER_CALL, clean_env
from .test_trainer_ddp import free_port, run_ranks

pytestmark = pytest.mark.slow

# About 300 batches of 64 per rank and epoch: an epoch lasts long enough to be interrupted.
SPIRAL = [
    "--task", "spiral", "--max-epochs", "3", "--set=data.samples=50000",
    "--set=trainer.batch_size=64", "--set=optim.lr=0.005", f"--set={ONE_BATCH_PER_CALL}",
]
BLOBS = [
    "--task", "custom", "--max-epochs", "3",
    "--set=custom.module=custom_pkg.stopping:SignallingBlobClassifier",
    "--set=custom.datamodule=custom_pkg.blobs:BlobData", "--set=trainer.batch_size=16",
    "--set=trainer.stop_check_every_n_steps=2",
]
TRAINER = [sys.executable, "-m", "hpctrain.trainer"]


def _srun_commands(run: Path, args: list[str]) -> list[tuple[list[str], dict[str, str]]]:
    job = {
        "SLURM_JOB_ID": "4343", "SLURM_JOB_NAME": "stop-test", "SLURM_NTASKS": "2",
        "SLURM_NTASKS_PER_NODE": "2", "SLURM_NNODES": "1", "SLURM_NODEID": "0",
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
        "HPCTRAIN_RUN_DIR": str(run), "OMP_NUM_THREADS": "1",
    }
    return [
        ([*TRAINER, *args], clean_env({**job, "SLURM_PROCID": str(r), "SLURM_LOCALID": str(r)}))
        for r in (0, 1)
    ]


def _wait_for_epoch(run: Path, procs: list[subprocess.Popen[str]], timeout: float = 60) -> None:
    """Wait until metrics.json holds epoch 1: the ranks are training epoch 2."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if json.loads((run / "metrics.json").read_text())["epochs"]:
                return
        except (OSError, ValueError, KeyError):
            pass
        assert all(p.poll() is None for p in procs), "a rank ended early"
        time.sleep(0.02)
    raise AssertionError("epoch 1 did not finish in time")


def _finish(procs: list[subprocess.Popen[str]], timeout: float = 60) -> list[int]:
    codes = []
    for p in procs:
        try:
            p.communicate(timeout=timeout)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        codes.append(p.returncode)
    return codes


def _check_resumed(run: Path, samples: int | None = None) -> dict:
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["status"] == "completed"
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2, 3]
    if samples is not None:
        assert [e["samples"] for e in metrics["epochs"]] == [samples] * 3
    first, second = metrics["restarts"]
    assert first["end"]["how"] == "stopped" and first["end"]["signal_to_checkpoint_s"] >= 0
    assert second["previous_end"] == first["end"] and second["slurm_job_id"] in ("4343", None)
    return metrics


@pytest.mark.parametrize("how", ["USR1", "TERM", "file"])
def test_srun_ranks_stop_on_a_request_and_resume(tmp_path: Path, how: str) -> None:
    run = tmp_path / "run"
    commands = _srun_commands(run, SPIRAL)
    procs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for cmd, env in commands
    ]
    _wait_for_epoch(run, procs)
    if how == "file":
        (run / rundir.STOP_REQUESTED).write_text(f"USR1 {time.time():.6f}\n")
    else:
        for p in procs:  # as srun forwards SIGTERM, or scancel --signal=USR1 --full
            p.send_signal(getattr(signal, f"SIG{how}"))
    assert _finish(procs) == [EXIT_REQUEUE, EXIT_REQUEUE]
    end = json.loads((run / "metrics.json").read_text())["restarts"][0]["end"]
    assert end["reason"] == {"USR1": "SIGUSR1", "TERM": "SIGTERM", "file": "stop file"}[how]
    assert (run / rundir.STOP_SAVED).is_file() and (run / "last.ckpt").is_file()

    results = run_ranks(_srun_commands(run, SPIRAL))
    assert [rc for rc, _, _ in results] == [0, 0], results[0][2][-2000:]
    _check_resumed(run, samples=40000)


def test_torchrun_workers_stop_on_the_stop_file_and_resume(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
        "-m", "hpctrain.trainer", *SPIRAL, "--run-dir", str(run),
    ]
    env = clean_env({"OMP_NUM_THREADS": "1"})
    agent = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    _wait_for_epoch(run, [agent])
    # The batch shell's trap: torchrun's agent does not pass SIGUSR1 on to its workers.
    (run / rundir.STOP_REQUESTED).write_text(f"USR1 {time.time():.6f}\n")
    [code] = _finish([agent])
    # torchrun reports any failed worker as 1; the stop-saved marker tells a stop apart.
    assert code == 1 and (run / rundir.STOP_SAVED).is_file()
    [(rc, _, err)] = run_ranks([(cmd, env)])
    assert rc == 0, err[-2000:]
    _check_resumed(run, samples=40000)


def _blob_run(run: Path, signal_at_step: int) -> list[tuple[int, str, str]]:
    args = [*BLOBS, f"--set=custom.module_kwargs={{signal_at_step: {signal_at_step}}}"]
    commands = _srun_commands(run, args)
    for _, env in commands:
        env["PYTHONPATH"] = f"{Path(__file__).parent}:{env['PYTHONPATH']}"
    return run_ranks(commands)


def test_custom_module_under_ddp_resumes_exactly(tmp_path: Path) -> None:
    run = tmp_path / "run"
    # 8 batches per rank and epoch; the signal after step 10 is acted on after step 12.
    assert [rc for rc, _, _ in _blob_run(run, 10)] == [EXIT_REQUEUE, EXIT_REQUEUE]
    end = json.loads((run / "metrics.json").read_text())["restarts"][0]["end"]
    assert (end["epoch"], end["mid_epoch"], end["batches_done_in_epoch"]) == (2, True, 4)
    assert [rc for rc, _, _ in _blob_run(run, -1)] == [0, 0]
    _check_resumed(run, samples=256)
    assert [rc for rc, _, _ in _blob_run(tmp_path / "straight", -1)] == [0, 0]
    ours = torch.load(run / "last.ckpt", weights_only=False)["state_dict"]
    straight = torch.load(tmp_path / "straight" / "last.ckpt", weights_only=False)["state_dict"]
    assert all(torch.equal(ours[k], straight[k]) for k in straight)


def test_lightning_local_launch_stops_with_75(tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = [
        *BLOBS, "--set=custom.module_kwargs={signal_at_step: 10}", "--set=trainer.devices=2",
        "--run-dir", str(run),
    ]
    env = clean_env({"PYTHONPATH": f"{Path(__file__).parent}:{clean_env()['PYTHONPATH']}"})
    [(rc, _, err)] = run_ranks([([*TRAINER, *args], env)])
    assert rc == EXIT_REQUEUE, err[-2000:]
    assert json.loads((run / "metrics.json").read_text())["status"] == "stopped"
