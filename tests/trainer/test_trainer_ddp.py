"""Multi-process DDP on the CPU (gloo): two ranks launched as srun would, and by torchrun."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import TINY_SPIRAL, clean_env, epochs_in

ARGS = ["--task", "spiral", "--max-epochs", "2", *[f"--set={o}" for o in TINY_SPIRAL]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ranks(
    commands: list[tuple[list[str], dict[str, str]]], timeout: float = 150
) -> list[tuple[int, str, str]]:
    """Start all processes, wait for all (killing them all on timeout), return (rc, out, err)."""
    procs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for cmd, env in commands
    ]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            results.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return results


@pytest.mark.slow
def test_two_ranks_under_emulated_srun(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    job = {
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NAME": "hpctrain-test",
        "SLURM_NTASKS": "2",
        "SLURM_NTASKS_PER_NODE": "2",
        "SLURM_NNODES": "1",
        "SLURM_NODEID": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "HPCTRAIN_RUN_DIR": str(run_dir),
    }
    commands = [
        (
            [sys.executable, "-m", "hpctrain.trainer", *ARGS, "--scale-lr", "linear"],
            clean_env({**job, "SLURM_PROCID": str(rank), "SLURM_LOCALID": str(rank)}),
        )
        for rank in (0, 1)
    ]
    (rc0, out0, err0), (rc1, out1, err1) = run_ranks(commands)
    assert rc0 == 0, err0
    assert rc1 == 0, err1
    assert "world_size=2 nodes=1 devices_per_node=2 accelerator=cpu backend=gloo" in out0
    assert "effective_batch_size=512" in out0 and "learning_rate=0.02 (base 0.01" in out0
    assert epochs_in(out0) == [1, 2]
    assert epochs_in(out1) == [] and "world_size" not in out1  # rank 0 alone reports
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert (metrics["world_size"], metrics["num_nodes"], metrics["devices_per_node"]) == (2, 1, 2)
    assert metrics["launch"] == "slurm" and metrics["slurm_job_id"] == "4242"
    # Both ranks' samples count: each trains on its half of the 3277 training points.
    assert metrics["epochs"][0]["samples"] == 3276
    assert (run_dir / "last.ckpt").is_file()


@pytest.mark.slow
def test_two_workers_under_torchrun(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        "-m",
        "hpctrain.trainer",
        *ARGS,
        "--run-dir",
        str(run_dir),
    ]
    [(rc, out, err)] = run_ranks([(cmd, clean_env({"OMP_NUM_THREADS": "1"}))])
    assert rc == 0, err
    assert (
        "world_size=2 nodes=1 devices_per_node=2 accelerator=cpu backend=gloo launch=torchrun"
        in out
    )
    assert json.loads((run_dir / "metrics.json").read_text())["world_size"] == 2
