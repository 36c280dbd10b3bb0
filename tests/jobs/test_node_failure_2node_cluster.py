"""The second node of a 2-node job dies under it, on the dev cluster (issue 41): the in-job
supervisor restarts nothing there, SLURM ends the job NODE_FAIL and requeues it, and the
requeued run finishes every epoch once from the checkpoint.

The node's death: its slurmd killed with the job's processes of that node (the dev cluster's
nodes share one host, so the test kills them), as in test_node_failure_cluster.py.

SLURM keeps what it could not tell the dead node and tells it again every 60 s until the node
answers (slurmctld's agent retry list, sdiag's "Agent queue size"). Here that is the step
signal of srun --kill-on-bad-exit: rank 0 fails at once when node 2's rank dies, and srun asks
slurmctld to kill step JOB.1 on both nodes. The requeued run has the same job id and its
training step the same step id (the monitor is JOB.0), so that signal, delivered to node 2's
revived slurmd while the requeued run trains there, stops it (SIGTERM: a safe stop, and the
job ends COMPLETED at an earlier epoch; or a rank killed in start-up, restarted in the job).
A node that comes back minutes later has long had it; this test revives node 2 within seconds,
so the requeued job is held until slurmctld has nothing left to send.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
from pathlib import Path

import pytest

from hpctrain.slurm.client import SlurmClient
from hpctrain.values.attempts import END, parse_attempts
from hpctrain.values.rundir import RunDir
from tests.cluster.test_requeue import assert_every_epoch_once, metrics
from tests.conftest import DevClusterHandle
from tests.jobs.test_jobs_cluster import Cli
from tests.jobs.test_node_failure_cluster import SPIRAL, _job_processes
from tests.waits import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def _agent_busy(client: SlurmClient) -> tuple[int, int]:
    """slurmctld's messages still to retry and its agents at work now (sdiag)."""
    out = client.run(["sdiag"], check=False).stdout
    found = dict(re.findall(r"^(Agent queue size|Agent count):\s*(\d+)", out, re.M))
    return int(found.get("Agent queue size", -1)), int(found.get("Agent count", -1))


def _node_processes(job_id: str, node: str) -> list[int]:
    """The job's processes of one node (the dev cluster's nodes share this host): its tasks
    (SLURMD_NODENAME) and the slurmstepds they run under."""
    tasks = [pid for pid in _job_processes(job_id) if _environ_has(
        pid, f"SLURMD_NODENAME={node}")]
    parents = {_parent(pid) for pid in tasks}
    steps = [pid for pid in parents if pid and _cmdline(pid).startswith(b"slurmstepd:")]
    return tasks + steps


def _environ_has(pid: int, entry: str) -> bool:
    with contextlib.suppress(OSError):
        return entry.encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return False


def _parent(pid: int) -> int:
    with contextlib.suppress(OSError, IndexError, ValueError):
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return 0


def _cmdline(pid: int) -> bytes:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    return b""


def test_a_dead_second_node_is_left_to_slurm_not_restarted_in_the_job(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    """Node 2 of a 2-node job dies (its slurmd, its tasks): the step fails, but the in-job
    supervisor restarts nothing on a node that does not answer; it holds the job until SLURM
    finds the node down, ends the job NODE_FAIL and requeues it, which completes once the node
    is back (the dev cluster has no third node to go without it)."""
    cli = Cli(devcluster, tmp_path)
    (cli.cwd / "spiral.yaml").write_text(SPIRAL)
    job = cli.submit("--nodes", "2", "--gpus-per-node", "1", "--time", "10",
                     "--config", "spiral.yaml", "--max-epochs", "30")
    job_id, run_dir = str(job["job_id"]), Path(job["run_dir"])
    wait_for(lambda: (run_dir / "last.ckpt").exists(), 300, "the first checkpoint")
    slurmd = int((devcluster.directory / "run" / "slurmd-node2.pid").read_text())
    os.kill(slurmd, signal.SIGKILL)
    for pid in _node_processes(job_id, "node2"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    client = devcluster.client()

    def first_end() -> list[str]:
        return client.run(["sacct", "--duplicates", "-X", "-n", "-P", "-j", job_id, "-o",
                           "State"]).stdout.split()[:1]

    err = next(run_dir.glob("*.err"))
    try:
        # Either SLURM finds the node dead first (this cluster's slurmctld often does, within
        # seconds), or the supervisor holds the job for it; the test then says it is down.
        wait_for(lambda: first_end() == ["NODE_FAIL"]
                 or "a node of the job does not answer" in err.read_text(), 120,
                 "the node's failure found, or the supervisor holding the job")
        client.run(["scontrol", "update", "NodeName=node2", "State=DOWN",
                    "Reason=slurmd killed by the test"], check=False)
        wait_for(first_end, 120, "the first end", until=lambda s: s == ["NODE_FAIL"])
        # Held before node 2 is back: it would start there at once (module docstring).
        wait_for(lambda: client.run(["scontrol", "hold", job_id], check=False).returncode, 60,
                 "the requeued job held", until=lambda rc: rc == 0)
    finally:
        assert cli.cluster.cli("devcluster", "up").returncode == 0
        client.run(["scontrol", "update", "NodeName=node2", "State=RESUME"], check=False)
    try:
        wait_for(lambda: _agent_busy(client), 180, "slurmctld's retried messages delivered",
                 until=lambda busy: busy == (0, 0), poll_s=1)
    finally:
        client.run(["scontrol", "release", job_id], check=False)
    ended = cli.wait(job_id, lambda j: j["terminal"], 400)
    assert ended["state"] == "COMPLETED", ended
    tried = parse_attempts(RunDir(run_dir).attempts.read_text())
    assert tried[0].then == END and tried[0].requeue == 0, tried
    assert "restarting the ranks inside the job" not in err.read_text()
    assert_every_epoch_once(metrics({"run_dir": run_dir}), 30)
