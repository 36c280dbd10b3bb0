"""A node that dies under a job, on the dev cluster (issue 41): NODE_FAIL, the node
quarantined, the job (requeueable with --retries) run again elsewhere from its checkpoint with
every epoch once; and a job whose own code raises is not retried.

The node's death: its slurmd killed, and with it every process of the job there (on a real
node they die with it; the dev cluster's nodes share one host, so the test kills them). Then
the node is set DOWN as slurmctld would after SlurmdTimeout without an answer: the same path
(the node's jobs end NODE_FAIL, a requeueable one is requeued), without racing its timer."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpctrain.values.rundir import RunDir
from tests.cluster.test_requeue import assert_every_epoch_once, metrics
from tests.conftest import DevClusterHandle
from tests.jobs.test_jobs_cluster import Cli
from tests.waits import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# One rank, long enough to be killed after its first checkpoint and finish after the requeue.
SPIRAL = "task: spiral\ntrainer: {max_epochs: 60, batch_size: 256}\ndata: {samples: 16384}\n"


def _job_processes(job_id: str) -> list[int]:
    """The job's processes on this host: its slurmstepds and what they started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            env = (entry / "environ").read_bytes().split(b"\0")
            if (cmd.startswith(b"slurmstepd: [" + job_id.encode() + b".")
                    or f"SLURM_JOB_ID={job_id}".encode() in env):
                found.append(int(entry.name))
    return found


@contextlib.contextmanager
def node_dead(cluster: DevClusterHandle, node: str, job_id: str) -> Iterator[None]:
    """`node` dies with the job's processes on it; back and idle after the block."""
    slurmd = int((cluster.directory / "run" / f"slurmd-{node}.pid").read_text())
    os.kill(slurmd, signal.SIGKILL)
    for pid in _job_processes(job_id):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    client = cluster.client()
    try:
        client.run(["scontrol", "update", f"NodeName={node}", "State=DOWN",
                    "Reason=slurmd killed by the test"])
        yield
    finally:
        res = cluster.cli("devcluster", "up")
        assert res.returncode == 0, res.stderr
        client.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], check=False)
        wait_for(lambda: client.run(["sinfo", "-h", "-n", node, "-o", "%t"]).stdout.strip(),
                 60, f"{node} back", until=lambda s: s in ("idle", "mix", "alloc"))


def test_a_dead_node_is_quarantined_and_the_run_completes_elsewhere(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    cli = Cli(devcluster, tmp_path)
    (cli.cwd / "spiral.yaml").write_text(SPIRAL)
    job = cli.submit("--gpus-per-node", "1", "--time", "10", "--retries", "1",
                     "--config", "spiral.yaml")
    job_id, run_dir = str(job["job_id"]), Path(job["run_dir"])
    wait_for(lambda: (run_dir / "last.ckpt").exists(), 300, "the first checkpoint")
    node = cli.job(job_id)["node_list"]
    with node_dead(devcluster, node, job_id):
        ended = cli.wait(job_id, lambda j: j["terminal"], 300)
        assert ended["state"] == "COMPLETED", ended
        assert ended["node_list"] != node, ended
    runs = devcluster.client().run(["sacct", "--duplicates", "-X", "-n", "-P", "-j", job_id,
                                    "-o", "State,NodeList"]).stdout.split()
    assert runs[0].startswith(f"NODE_FAIL|{node}") and runs[-1].startswith("COMPLETED|"), runs

    m = metrics({"run_dir": run_dir})
    assert_every_epoch_once(m, 60)
    assert m["restarts"][1]["resumed_from"] is not None, m["restarts"]
    assert m["restarts"][1]["resumed_from"]["epoch"] > 1

    held = json.loads(cli.ok("nodes", "--json").stdout)["nodes"]
    assert [(n["node"], n["reasons"], n["jobs"]) for n in held] == [
        (node, ["node_failure"], [job_id])], held
    again = cli.submit("--gpus-per-node", "1", "--dry-run")
    assert node in again["plan"]["exclude"], again["plan"]


def test_an_exception_in_the_users_code_is_not_retried(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    cli = Cli(devcluster, tmp_path)
    job = cli.submit("--gpus-per-node", "1", "--retries", "2", "--", "python", "-c",
                     "raise ValueError('the code is wrong')")
    ended = cli.wait(str(job["job_id"]), lambda j: j["terminal"], 180)
    assert ended["state"] == "FAILED" and "ValueError" in ended["verdict"], ended
    assert not RunDir(job["run_dir"]).retries.exists()
    runs = devcluster.client().run(["sacct", "--duplicates", "-X", "-n", "-P", "-j",
                                    str(job["job_id"]), "-o", "State"]).stdout.split()
    assert runs == ["FAILED"], runs
    assert json.loads(cli.ok("nodes", "--json").stdout)["nodes"] == []

