"""Runs longer than the time limit, on the dev cluster: warned, saved, requeued, resumed exactly.

Real SLURM (--signal=B:USR1, scontrol requeue), real 2-node DDP (gloo), 1-minute limits.
slurmctld checks time limits every 30 s and sends the warning when the time left is under the
grace plus that period: `--time 1 --grace 10` warns 20 to 50 s into each job.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.cluster.test_training_jobs import submit
from tests.waits import wait_for

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
# quiet: SLURM's time-limit timer and requeues of 2-node gloo runs; under three other lanes'
# load a resumed segment's rendezvous failed once (connection reset, address in use). The
# chain's cancel and a dependency never met train nothing: they run in the lanes.
quiet = pytest.mark.quiet

# A spiral that trains longer than one segment. A segment trains for 12 to 42 s (the warning
# comes 20 to 50 s into a 1-minute job, after start-up); 2-node epochs of 16384 samples take
# about 0.14 to 0.25 s here (0.144 s median in a chain run of 200 epochs), so 400 of them (56 s
# or more) need at least two segments, usually three.
LONG_SPIRAL = "task: spiral\ntrainer: {max_epochs: 600, batch_size: 256}\ndata: {samples: 16384}\n"


# Two nodes of one rank each: these tests are about segments across nodes, not rank counts
# (the 2x2 job is test_training_jobs.py's); half the processes to start in every segment.
TWO_NODES = ("--profile", "local", "--nodes", "2", "--gpus-per-node", "1")


def metrics(job: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((Path(job["run_dir"]) / "metrics.json").read_text())
    return data


def wait_while_training(dc: DevClusterHandle, job: dict[str, Any],
                        stall_s: float = 300.0) -> dict[str, str]:
    """The job's final sacct row, waited for as long as its run keeps finishing epochs.

    On a loaded machine the same epochs need more 1-minute segments; only a run that stops
    moving for `stall_s` fails, whatever the machine's speed today.
    """
    done = -1
    while True:
        try:
            return dc.wait_job(str(job["job_id"]), timeout_s=stall_s)
        except AssertionError:
            path = Path(job["run_dir"]) / "metrics.json"
            now = metrics(job)["epochs_completed"] if path.exists() else 0
            if now <= done:
                raise
            done = now


def assert_every_epoch_once(m: dict[str, Any], max_epochs: int) -> None:
    assert [e["epoch"] for e in m["epochs"]] == list(range(1, max_epochs + 1))


# SLURM's own timer, end to end: the limit's warning must come and the run must span segments;
# most runs show two or more requeues, a resumed segment stopped again.
@quiet
def test_long_training_survives_the_limit_by_requeueing(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    # One thread a rank (tests/conftest.py) and one rank a node made epochs faster: 400 of them
    # once ended inside the first segment, before the warning. 1,000 span several segments.
    epochs = 1000
    (tmp_path / "long.yaml").write_text(LONG_SPIRAL.replace("600", str(epochs)))
    job = submit(devcluster, tmp_path, *TWO_NODES, "--time", "1",
                 "--grace", "10", "--config", "long.yaml")
    row = wait_while_training(devcluster, job)
    log = Path(job["stdout"]).read_text()
    assert row["State"] == "COMPLETED", log
    m = metrics(job)
    assert m["status"] == "completed"
    assert_every_epoch_once(m, epochs)
    stops = [r["end"] for r in m["restarts"] if r["end"] and r["end"]["how"] == "stopped"]
    assert stops, m["restarts"]
    assert log.count("requeueing job") == len(stops)
    # Each checkpoint was on disk before its segment's limit (SLURM's start of that segment plus
    # the 1-minute limit): what the warning is for, however slow this machine is today.
    starts = segment_starts(devcluster, str(job["job_id"]))
    for stop in stops:
        start = max(t for t in starts if t <= stop["requested_at"])
        assert stop["requested_at"] <= stop["checkpoint_at"] < start + 60, (stop, starts)
    assert {r["slurm_job_id"] for r in m["restarts"]} == {str(job["job_id"])}
    shown = subprocess.run([sys.executable, "-m", "hpctrain", "status", "--json",
                            str(job["job_id"])], env=devcluster.env(), capture_output=True,
                           text=True, timeout=60, check=True).stdout
    assert json.loads(shown)["jobs"][0]["restarts"] == len(stops)


@quiet
def test_torchrun_ranks_are_requeued_by_the_warning(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    """torchrun maps its workers' exits to its own; the warning must still end in a requeue.

    The warning is sent as SLURM sends it (USR1 to the batch shell) once an epoch is saved:
    the timer itself is the test above's, and racing it here cost five minutes a run.
    """
    (tmp_path / "warned.yaml").write_text(
        LONG_SPIRAL.replace("16384", "8192").replace("600", "200"))
    job = submit(devcluster, tmp_path, *TWO_NODES, "--time", "5",
                 "--grace", "10", "--launcher", "torchrun", "--config", "warned.yaml")
    run_dir = Path(job["run_dir"])
    wait_for(lambda: (run_dir / "last.ckpt").exists(), 300, "first checkpoint")
    devcluster.client().run(["scancel", "--batch", "--signal=USR1", str(job["job_id"])])
    row = wait_while_training(devcluster, job)
    log = Path(job["stdout"]).read_text()
    assert row["State"] == "COMPLETED", log
    m = metrics(job)
    assert_every_epoch_once(m, 200)
    first_end = m["restarts"][0]["end"]
    assert first_end["how"] == "stopped", m["restarts"]
    assert log.count("requeueing job") == 1
    assert m["restarts"][1]["resumed_from"]["global_step"] == first_end["global_step"]


@quiet
def test_external_requeue_mid_epoch_resumes_from_that_step(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    """A preemption: SLURM requeues the job (SIGTERM to the ranks); it resumes mid-epoch."""
    (tmp_path / "short.yaml").write_text(LONG_SPIRAL.replace("600", "120"))
    job = submit(devcluster, tmp_path, *TWO_NODES, "--time", "5",
                 "--config", "short.yaml")
    job_id = str(job["job_id"])
    run_dir = Path(job["run_dir"])
    wait_for(lambda: (run_dir / "last.ckpt").exists(), 300, "first checkpoint")
    client = devcluster.client()
    client.run(["scontrol", "requeue", job_id])
    row = wait_while_training(devcluster, job)
    assert row["State"] == "COMPLETED", Path(job["stdout"]).read_text()
    m = metrics(job)
    assert_every_epoch_once(m, 120)
    first_end = m["restarts"][0]["end"]
    assert first_end["how"] == "stopped" and first_end["reason"].startswith("SIGTERM")
    assert m["restarts"][1]["resumed_from"]["global_step"] == first_end["global_step"]


def segment_starts(dc: DevClusterHandle, job_id: str) -> list[float]:
    """When SLURM started each segment of a requeued job (sacct --duplicates), epoch seconds."""
    out = dc.client().run(["sacct", "--duplicates", "-X", "-n", "-P", "-j", job_id,
                           "-o", "Start"]).stdout
    # sacct prints local time to the second; a segment not started yet shows `Unknown`.
    return sorted(time.mktime(time.strptime(t, "%Y-%m-%dT%H:%M:%S"))
                  for t in out.split() if t[:1].isdigit())


def hpctrain(dc: DevClusterHandle, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpctrain", *args], cwd=cwd, env=dc.env(),
                          capture_output=True, text=True, timeout=120, check=False)


@quiet
def test_chain_without_requeue_carries_the_run_on(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    # The first segment gets the time-limit warning as SLURM sends it (USR1 to the batch shell,
    # --signal=B:USR1) once it has saved an epoch, instead of from its limit: when the limit's
    # warning comes depends on slurmctld's 30 s check and this machine's speed, and a run that
    # fits in one segment would show nothing. Without requeue, the next segment carries it on.
    (tmp_path / "chain.yaml").write_text(LONG_SPIRAL.replace("600", "200"))
    job = submit(devcluster, tmp_path, *TWO_NODES, "--time", "5",
                 "--grace", "10", "--no-requeue", "--chain", "4", "--config", "chain.yaml")
    ids = job["chain"]
    assert len(ids) == 4 and ids[0] == job["job_id"]
    shown = hpctrain(devcluster, tmp_path, "status", *ids).stdout
    assert shown.count("/4]") == 1  # one row for the whole chain
    run_dir = Path(job["run_dir"])
    wait_for(lambda: (run_dir / "last.ckpt").exists(), 300, "first checkpoint")
    devcluster.client().run(["scancel", "--batch", "--signal=USR1", str(ids[0])])
    rows = [devcluster.wait_job(i, timeout_s=300) for i in ids]
    assert [r["State"] for r in rows] == ["COMPLETED"] * 4
    m = metrics(job)
    assert m["status"] == "completed"
    assert_every_epoch_once(m, 200)
    trained = [r["slurm_job_id"] for r in m["restarts"]]
    assert trained == ids[:2], m["restarts"]
    assert m["restarts"][0]["end"]["how"] == "stopped"
    for job_id in ids:
        log = (run_dir / f"hpctrain-{job_id}.out").read_text()
        assert "requeueing" not in log
        if job_id not in trained:  # after the end: out at once
            assert "nothing left to do" in log
    listed = json.loads(hpctrain(devcluster, tmp_path, "status", "--json", *ids).stdout)
    assert [j["chain"]["segment"] for j in listed["jobs"]] == [1, 2, 3, 4]


def test_cancelling_one_job_of_a_chain_cancels_the_chain(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    job = submit(devcluster, tmp_path, "--profile", "local", "--chain", "3", "--", "sleep", "60")
    done = hpctrain(devcluster, tmp_path, "cancel", "--json", str(job["chain"][1]))
    assert done.returncode == 0, done.stderr
    assert sorted(json.loads(done.stdout)["cancelled"]) == sorted(job["chain"])
    for job_id in job["chain"]:
        assert devcluster.wait_job(job_id, timeout_s=60)["State"].startswith("CANCELLED")


def test_a_dependency_that_can_never_be_met_is_shown(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    failing = submit(devcluster, tmp_path, "--profile", "local", "--", "false")
    devcluster.wait_job(str(failing["job_id"]), timeout_s=60)
    waiting = submit(devcluster, tmp_path, "--profile", "local", "--after",
                     str(failing["job_id"]), "--", "true")
    wait_for(lambda: hpctrain(devcluster, tmp_path, "status", str(waiting["job_id"])).stdout,
             120, "DependencyNeverSatisfied in `hpctrain status`",
             until=lambda shown: "DependencyNeverSatisfied" in shown, poll_s=1)
    hpctrain(devcluster, tmp_path, "cancel", str(waiting["job_id"]))
