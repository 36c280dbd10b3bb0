"""The fault matrix in the packaged trainer (issue 51), on the dev cluster's 2 nodes x 2 ranks
(gloo on CPU): a user's LightningModule, run by `python -m hpctrain.trainer --task custom`,
misbehaves as the environment variable FAULT_ROW says (`-e`): one rank raises in its
training_step; one rank sleeps in a function of its own before the gradient all-reduce (a hang:
ended within its window plus 90 s, `why` names the rank, its node, the collective and the
frame); a correct run completes. No row quarantines a node (`hpctrain nodes`).

The rows share one history (a module's `cli`), so that the last test sees every row's jobs.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hpctrain.values.rundir import RunDir
from tests.conftest import DevClusterHandle
from tests.jobs.test_jobs_cluster import Cli

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

WINDOW_S = 15
# The bound: a hang is ended within its window plus 90 s of the last progress.
ENDED_WITHIN_S = WINDOW_S + 90

# The user's module: a tiny regression whose training_step misbehaves on one rank at one call
# of its own (FAULT_ROW=KIND:RANK:CALL), read from the job's environment.
MODULE = '''\
import os
import time

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def wait_for_the_others(seconds):
    time.sleep(seconds)


class Data(L.LightningDataModule):
    def __init__(self, batch_size=4):
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(64, 4, generator=g)
        self.train_set = TensorDataset(x, x.sum(1, keepdim=True))

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size)


class Faulty(L.LightningModule):
    def __init__(self, lr=0.05):
        super().__init__()
        self.lr = lr
        self.net = nn.Linear(4, 1)
        kind, rank, call = (os.environ.get("FAULT_ROW") or "none:0:0").split(":")
        self.kind, self.rank, self.call, self.calls = kind, int(rank), int(call), 0

    def training_step(self, batch, batch_idx):
        self.calls += 1
        if self.global_rank == self.rank and self.calls == self.call:
            if self.kind == "raise":
                raise RuntimeError(f"simulated bug on rank {self.global_rank}")
            if self.kind == "sleep":
                wait_for_the_others(3600)
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)
'''


@pytest.fixture(scope="module")
def cli(devcluster: DevClusterHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    cli = Cli(devcluster, tmp_path_factory.mktemp("faults-trainer"))
    (cli.cwd / "faultpkg").mkdir()
    (cli.cwd / "faultpkg" / "__init__.py").write_text("")
    (cli.cwd / "faultpkg" / "model.py").write_text(MODULE)
    yield cli


def _train(cli: Cli, row: str, *options: str, epochs: int = 2) -> dict[str, Any]:
    """Submit the trainer on 2 nodes x 2 ranks with FAULT_ROW=row; the ended job's row."""
    job = cli.submit("--nodes", "2", "--gpus-per-node", "2", "-e", f"FAULT_ROW={row}",
                     *options, "--", "python", "-m", "hpctrain.trainer", "--task", "custom",
                     "--max-epochs", str(epochs),
                     "--set=custom.module=faultpkg.model:Faulty",
                     "--set=custom.datamodule=faultpkg.model:Data",
                     "--set=trainer.batch_size=4")
    ended = cli.wait(str(job["job_id"]), lambda j: j["terminal"], 300)
    return {**job, **ended}


def _why(cli: Cli, job_id: object) -> dict[str, Any]:
    got: dict[str, Any] = json.loads(cli.ok("why", str(job_id), "--json").stdout)
    return got


def _end_time(cli: Cli, job_id: str) -> float:
    """sacct's End of the job (the allocation freed), as seconds since the epoch."""
    out = cli.cluster.client().run(["sacct", "-n", "-P", "-X", "-j", job_id,
                                    "--format=End"], check=False).stdout
    return time.mktime(time.strptime(out.split()[-1], "%Y-%m-%dT%H:%M:%S"))


def test_a_rank_that_raises_in_training_step_is_the_cause(cli: Cli) -> None:
    job = _train(cli, "raise:3:2")
    assert job["state"] == "FAILED", job
    got = _why(cli, job["job_id"])
    assert got["cause"] == "exception", got
    assert "rank 3" in got["summary"], got["summary"]
    assert "RuntimeError: simulated bug on rank 3" in got["summary"], got["summary"]
    # The rank's own line in the user's module, not the trainer's or Lightning's.
    assert "faultpkg/model.py:" in got["summary"] and "(training_step)" in got["summary"], got
    # A peer's lost connection is never the cause.
    assert "Connection closed by peer" not in got["summary"].split(";")[0]
    assert job["verdict"] and "simulated bug on rank 3" in job["verdict"], job


def test_a_rank_asleep_before_the_gradient_all_reduce_is_ended_and_named(cli: Cli) -> None:
    job = _train(cli, "sleep:1:3", "--time", "4", "--stall-window", str(WINDOW_S), epochs=20)
    assert job["state"] == "CANCELLED" and job["verdict"] == "stalled", job
    run_dir = Path(job["run_dir"])
    report = json.loads(RunDir(run_dir).stall_report.read_text())
    last = max(json.loads(p.read_text())["t"]
               for p in RunDir(run_dir).progress_dir.glob("*.json"))
    took = _end_time(cli, str(job["job_id"])) - last
    assert took <= ENDED_WITHIN_S + 1, (took, report)  # sacct's End is whole seconds
    assert report["verdict"]["stalled"] and report["verdict"]["rank"] == 1, report["verdict"]
    node = report["verdict"]["node"]
    hung = next(r for v in report["nodes"] for r in v["ranks"] if r["rank"] == 1)
    assert node == hung["node"], report

    got = _why(cli, job["job_id"])
    assert got["cause"] == "stalled", got
    summary = got["summary"]
    # The gradients' all-reduce the others waited in, by its sequence number.
    assert re.search(rf"rank 1 on {node} never entered all_reduce #\d+ \(its last: "
                     r"all_reduce #\d+\); ranks 0, 2, 3 waited in it", summary), summary
    assert "wait_for_the_others" in summary and "model.py" in summary, summary


def test_a_correct_run_completes(cli: Cli) -> None:
    job = _train(cli, "none:0:0")
    assert job["state"] == "COMPLETED" and job["exit_code"] == 0, job
    err = Path(job["stderr"]).read_text()
    assert "terminate called without an active exception" not in err, err[-2000:]
    assert not RunDir(job["run_dir"]).stall_report.exists()


def test_no_row_quarantines_a_node(cli: Cli) -> None:
    """Every row's job ended; the stall was the user's own code: no node is blamed, neither
    quarantined nor watched."""
    cli.ok("status", "--all")  # status keeps a node's evidence when it first sees a job ended
    listed = json.loads(cli.ok("nodes", "--json").stdout)
    assert listed["nodes"] == [] and listed["watched"] == [], listed
