"""The safe stop with two real DDP workers (gloo on the CPU) under torchrun and Lightning's own
local launch. Ranks started by srun in a real job: test_trainer_stop_ddp_cluster.py."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpctrain.trainer.signals import EXIT_REQUEUE
from hpctrain.values.rundir import RunDir

from .helpers import ONE_BATCH_PER_CALL, clean_env
from .test_trainer_ddp import run_ranks

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


def _wait_for_epoch(run: Path, procs: list[subprocess.Popen[str]], timeout: float = 180) -> None:
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
    raise AssertionError(f"epoch 1 not in metrics.json after {timeout} s")


def _finish(procs: list[subprocess.Popen[str]], timeout: float = 180) -> list[int]:
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
    assert second["previous_end"] == first["end"] and second["slurm_job_id"] is None
    return metrics


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
    RunDir(run).stop_requested.write_text(f"USR1 {time.time():.6f}\n")
    [code] = _finish([agent])
    # torchrun reports any failed worker as 1; the stop-saved marker tells a stop apart.
    assert code == 1 and RunDir(run).stop_saved.is_file()
    [(rc, _, err)] = run_ranks([(cmd, env)])
    assert rc == 0, err[-2000:]
    _check_resumed(run, samples=40000)


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
