"""Multi-process DDP on the CPU (gloo): two workers started by torchrun on this machine.

Ranks started by srun run in a real job on the dev cluster: test_trainer_ddp_cluster.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import TINY_SPIRAL, clean_env

ARGS = ["--task", "spiral", "--max-epochs", "2", *[f"--set={o}" for o in TINY_SPIRAL]]


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
