"""The safe stop with two real DDP ranks (gloo on the CPU) started by srun in a real job on the
dev cluster: a signal SLURM delivers to the step, or the stop file, then a resuming job."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import torch

from hpctrain.trainer.signals import EXIT_REQUEUE
from hpctrain.values.rundir import RunDir

from .slurm_ranks import RanksJob, start_ranks
from .test_trainer_stop_ddp import BLOBS, SPIRAL

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

# quiet: 2-node gloo teardown, which aborts now and then on a loaded machine (examples/
# tutorials/ranks.py says how); alone, after the other lanes.
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.quiet]

STOPPED = {0: EXIT_REQUEUE, 1: EXIT_REQUEUE}
EPOCHS = 6
# Six epochs: the request, sent once epoch 1 is saved, must arrive while training still runs,
# on a busy machine too (about 1.3 s an epoch unloaded; five left is a wide margin).
LONG_SPIRAL = [*SPIRAL[:SPIRAL.index("--max-epochs")], "--max-epochs", str(EPOCHS),
               *SPIRAL[SPIRAL.index("--max-epochs") + 2:]]
FINISHED = {0: 0, 1: 0}


def _ranks(dc: DevClusterHandle, folder: Path, run: Path, args: list[str]) -> RanksJob:
    return start_ranks(dc, folder, args, env={"HPCTRAIN_RUN_DIR": str(run)})


def _check_resumed(run: Path, job_ids: list[str], samples: int) -> dict[str, Any]:
    metrics: dict[str, Any] = json.loads((run / "metrics.json").read_text())
    assert metrics["status"] == "completed"
    epochs = len(metrics["epochs"])
    assert [e["epoch"] for e in metrics["epochs"]] == list(range(1, epochs + 1))
    assert [e["samples"] for e in metrics["epochs"]] == [samples] * epochs
    first, second = metrics["restarts"]
    assert first["end"]["how"] == "stopped" and first["end"]["signal_to_checkpoint_s"] >= 0
    assert second["previous_end"] == first["end"]
    assert [first["slurm_job_id"], second["slurm_job_id"]] == job_ids
    return metrics


@pytest.mark.parametrize("how", ["USR1", "TERM", "file"])
def test_srun_ranks_stop_on_a_request_and_resume(
    devcluster: DevClusterHandle, tmp_path: Path, how: str
) -> None:
    run = tmp_path / "run"
    job = _ranks(devcluster, tmp_path / "stopped", run, LONG_SPIRAL)
    job.wait_for_epoch(run)
    if how == "file":
        RunDir(run).stop_requested.write_text(f"USR1 {time.time():.6f}\n")
    else:  # what scancel --signal=USR1, or a preemption's SIGTERM, delivers to the ranks
        job.signal_step(how)
    assert job.wait() == STOPPED, job.describe()
    end = json.loads((run / "metrics.json").read_text())["restarts"][0]["end"]
    assert end["reason"] == {"USR1": "SIGUSR1", "TERM": "SIGTERM", "file": "stop file"}[how]
    assert RunDir(run).stop_saved.is_file() and (run / "last.ckpt").is_file()

    again = _ranks(devcluster, tmp_path / "resumed", run, LONG_SPIRAL)
    assert again.wait() == FINISHED, again.describe()
    assert len(_check_resumed(run, [job.job_id, again.job_id], samples=40000)["epochs"]) == EPOCHS


def _blobs(signal_at_step: int) -> list[str]:
    return [*BLOBS, f"--set=custom.module_kwargs={{signal_at_step: {signal_at_step}}}"]


def test_custom_module_under_ddp_resumes_exactly(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    run, straight = tmp_path / "run", tmp_path / "straight"
    # 8 batches per rank and epoch; the signal after step 10 is acted on after step 12.
    stopped = _ranks(devcluster, tmp_path / "stopped", run, _blobs(10))
    # The uninterrupted run needs nothing from the others: it runs beside them (2 nodes).
    whole = _ranks(devcluster, tmp_path / "whole", straight, _blobs(-1))
    assert stopped.wait() == STOPPED, stopped.describe()
    end = json.loads((run / "metrics.json").read_text())["restarts"][0]["end"]
    assert (end["epoch"], end["mid_epoch"], end["batches_done_in_epoch"]) == (2, True, 4)
    resumed = _ranks(devcluster, tmp_path / "resumed", run, _blobs(-1))
    assert resumed.wait() == FINISHED, resumed.describe()
    _check_resumed(run, [stopped.job_id, resumed.job_id], samples=256)
    assert whole.wait() == FINISHED, whole.describe()
    ours = torch.load(run / "last.ckpt", weights_only=False)["state_dict"]
    theirs = torch.load(straight / "last.ckpt", weights_only=False)["state_dict"]
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)
