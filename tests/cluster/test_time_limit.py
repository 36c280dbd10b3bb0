"""A real time limit crossed, on the dev cluster: SLURM's own timer warns the batch shell, the
trainer saves before the limit, the job requeues itself and its next segment resumes there.

Run where it costs no wall time (scripts/test.sh: the SLURM 24.11 lane, which ends minutes
before the others); on 22.05 the quiet stage's test_requeue.py crosses the limit to the end of
training. Not quiet, since load cannot break it: one rank (no process group, so no gloo
rendezvous to fail in a resumed segment), and a run that needs far more than one 1-minute
segment however fast the machine, so the limit always comes first; the test ends once the
second segment has resumed, not when training would.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.cluster.test_requeue import metrics, segment_starts
from tests.cluster.test_training_jobs import submit
from tests.containers.image import container_image
from tests.waits import wait_for

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# An epoch is 64 steps of one rank: 20 ms on the idle development machine, so a million of
# them take hours here and over a quarter of an hour even at a millisecond each.
ENDLESS_SPIRAL = ("task: spiral\ntrainer: {max_epochs: 1000000, batch_size: 256}\n"
                  "data: {samples: 16384}\n")


def _resumed(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's segments once a second one has resumed from a checkpoint, else []."""
    if not (Path(job["run_dir"]) / "metrics.json").exists():
        return []
    restarts: list[dict[str, Any]] = metrics(job)["restarts"]
    return restarts if len(restarts) > 1 and restarts[1]["resumed_from"] else []


def test_a_real_time_limit_warns_and_the_next_segment_resumes(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    """With the rank inside Charliecloud (issue 56): SLURM's warning reaches the batch shell
    outside, which passes the stop to the rank inside through ch-run. One run, in a container:
    the timer's path outside is the same with or without one, and a minute of a training rank
    is CPU the suite's other lanes share (22.05's plain timer: the quiet stage's
    test_requeue.py)."""
    (tmp_path / "endless.yaml").write_text(ENDLESS_SPIRAL)
    boxed = ("--container", str(container_image()))
    job = submit(devcluster, tmp_path, "--profile", "local", "--nodes", "1",
                 "--gpus-per-node", "1", "--time", "1", "--grace", "10",
                 "--config", "endless.yaml", *boxed)
    job_id = str(job["job_id"])
    # A minute's segment, the requeue, a start-up: generous, it only bounds a hang.
    restarts = wait_for(lambda: _resumed(job), 600, "a second segment resumed")
    devcluster.client().run(["scancel", job_id])
    assert devcluster.wait_job(job_id, timeout_s=120)["State"].startswith("CANCELLED")
    log = Path(job["stdout"]).read_text()
    first_end = restarts[0]["end"]
    assert first_end["how"] == "stopped", restarts
    assert f"requeueing job {job_id}" in log, log
    # Asked by SLURM's warning inside the first segment, and saved before its limit (the
    # segment's start plus the 1-minute limit): what the warning is for.
    start = min(segment_starts(devcluster, job_id))
    assert start <= first_end["requested_at"] <= first_end["checkpoint_at"] < start + 60, (
        first_end, start)
    assert restarts[1]["resumed_from"]["global_step"] == first_end["global_step"]
    assert "ch-run" in (Path(job["run_dir"]) / "job.sbatch").read_text()
