"""The time limit's warning under `--launcher per-node`, in a real job: the node's trainer
(trainer/workers.py) combines its forked workers' safe stop (75) into its own, and the job
requeues itself and resumes from the step it saved.

The warning is sent as SLURM sends it (USR1 to the batch shell, --signal=B:USR1) once an epoch
is saved: the timer itself is tests/cluster/test_requeue.py's. One node of two workers: the
workers' stop is what is tested here, the stop across nodes is torchrun's test; and a 2-node
gloo run's stop is what load breaks (test_requeue.py is quiet for it), so this one is not.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.cluster.test_requeue import (
    LONG_SPIRAL,
    assert_every_epoch_once,
    metrics,
    wait_while_training,
)
from tests.cluster.test_training_jobs import submit
from tests.waits import wait_for

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_per_node_workers_are_requeued_by_the_warning(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    (tmp_path / "warned.yaml").write_text(
        LONG_SPIRAL.replace("16384", "8192").replace("600", "200"))
    job = submit(devcluster, tmp_path, "--profile", "local", "--nodes", "1",
                 "--gpus-per-node", "2", "--time", "5", "--grace", "10",
                 "--launcher", "per-node", "--config", "warned.yaml")
    run_dir = Path(job["run_dir"])
    wait_for(lambda: (run_dir / "last.ckpt").exists(), 300, "first checkpoint")
    devcluster.client().run(["scancel", "--batch", "--signal=USR1", str(job["job_id"])])
    row = wait_while_training(devcluster, job)
    log = Path(job["stdout"]).read_text()
    assert row["State"] == "COMPLETED", log
    m = metrics(job)
    # Forked workers of one node trainer, not one srun task a rank.
    assert m["launch"] == "per-node" and m["world_size"] == 2, log
    assert_every_epoch_once(m, 200)
    first_end = m["restarts"][0]["end"]
    assert first_end["how"] == "stopped", m["restarts"]
    assert log.count("requeueing job") == 1, log
    assert m["restarts"][1]["resumed_from"]["global_step"] == first_end["global_step"]
