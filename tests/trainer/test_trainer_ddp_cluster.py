"""Two DDP ranks (gloo on the CPU) started by srun in a real job on the dev cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .helpers import TINY_SPIRAL, epochs_in
from .slurm_ranks import start_ranks

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ARGS = ["--task", "spiral", "--max-epochs", "2", *[f"--set={o}" for o in TINY_SPIRAL]]


def test_two_ranks_of_a_real_srun_step(devcluster: DevClusterHandle, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    job = start_ranks(devcluster, tmp_path / "job", [*ARGS, "--scale-lr", "linear"],
                      env={"HPCTRAIN_RUN_DIR": str(run_dir)})
    assert job.wait() == {0: 0, 1: 0}, job.describe()
    out0, out1 = job.rank_output(0), job.rank_output(1)
    assert "world_size=2 nodes=1 devices_per_node=2 accelerator=cpu backend=gloo" in out0
    # 2 ranks x batch 256; the linear rule scales the base rate 0.01 by 2.
    assert "effective_batch_size=512" in out0 and "learning_rate=0.02 (base 0.01" in out0
    assert epochs_in(out0) == [1, 2]
    assert epochs_in(out1) == [] and "world_size" not in out1  # rank 0 alone reports
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert (metrics["world_size"], metrics["num_nodes"], metrics["devices_per_node"]) == (2, 1, 2)
    assert metrics["launch"] == "slurm" and metrics["slurm_job_id"] == job.job_id
    # Both ranks' samples count: each trains on its half of the 3277 training points.
    assert metrics["epochs"][0]["samples"] == 3276
    assert (run_dir / "last.ckpt").is_file()
