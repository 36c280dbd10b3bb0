"""One tracker run across every segment of a run, read from the tracker's own files (issue 54):
a 7-segment requeued run, a 3-segment chain and a sweep point's requeue.

Each segment gets the time limit's warning as SLURM sends it (USR1 to the batch shell,
--signal=B:USR1) once it has saved an epoch of its own, not from a real 1-minute limit, whose
30 s timer would make 7 segments take 7 minutes and some segments train nothing.
"""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.test_requeue import wait_while_training
from tests.cluster.test_training_jobs import submit
from tests.conftest import DevClusterHandle
from tests.options.helpers import User
from tests.waits import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# One epoch of 8192 samples takes about 0.1 s on one rank here: a segment warned within a few
# seconds of its first checkpoint trains tens of epochs, and 7 segments leave most of 400.
SPIRAL = "task: spiral\ntrainer: {max_epochs: %d, batch_size: 256}\ndata: {samples: 8192}\n"


def _tracker(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "tracker-run.json"
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data


def _saved_in_segment(run_dir: Path, segment: int) -> bool:
    """Whether start `segment` of the run has begun and saved a checkpoint of its own."""
    starts = _tracker(run_dir).get("starts") or []
    ckpt = run_dir / "last.ckpt"
    return (len(starts) == segment and ckpt.exists()
            and ckpt.stat().st_mtime > starts[-1]["at"])


def _warn(dc: DevClusterHandle, run_dir: Path, segment: int, job_id: str) -> None:
    """Send segment `segment` the time limit's warning once it has saved an epoch."""
    wait_for(lambda: _saved_in_segment(run_dir, segment), 300,
             f"a checkpoint of segment {segment}", poll_s=0.5)
    dc.client().run(["scancel", "--batch", "--signal=USR1", job_id])


def _csv_steps(run_dir: Path) -> dict[str, list[tuple[int, int]]]:
    """Each metric's (epoch, step) rows of metrics.csv, in file order."""
    with open(run_dir / "csv" / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    steps: dict[str, list[tuple[int, int]]] = {}
    for row in rows:
        for key, value in row.items():
            if value and key not in ("epoch", "step"):
                steps.setdefault(key, []).append((int(row["epoch"]), int(row["step"])))
    return steps


def _tensorboard_steps(run_dir: Path) -> dict[str, list[int]] | None:
    """Each scalar's steps as TensorBoard shows them (earlier starts' purged steps hidden)."""
    if importlib.util.find_spec("tensorboard") is None or not (run_dir / "tensorboard").is_dir():
        return None
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    return {tag: [e.step for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def assert_one_run(run_dir: Path, segments: int, max_epochs: int) -> None:
    """The run's tracker files hold one run of `segments` starts, each step and epoch once."""
    tracker = _tracker(run_dir)
    starts = tracker["starts"]
    assert len(starts) == segments, starts
    resumed = [s["resumed_at_step"] for s in starts]
    assert resumed[0] is None and resumed[1:] == sorted(set(resumed[1:])), resumed
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["status"] == "completed"
    assert [e["epoch"] for e in metrics["epochs"]] == list(range(1, max_epochs + 1))
    steps = _csv_steps(run_dir)
    # Validation is logged before an epoch's checkpoint: every epoch's, once. The training
    # loss of an epoch a safe stop ended is logged after it, by no start (the gap is known).
    assert [e for e, _ in steps["val_acc"]] == list(range(max_epochs)), steps["val_acc"]
    for key, rows in steps.items():
        at = [s for _, s in rows]
        assert at == sorted(set(at)), (key, at)
    assert len(steps["train_loss"]) >= max_epochs - (segments - 1)
    shown = _tensorboard_steps(run_dir)
    for tag, at in (shown or {}).items():
        # Lightning logs `epoch` with the validation and the training metrics: twice a step.
        assert at == (sorted(at) if tag == "epoch" else sorted(set(at))), (tag, at)


def test_a_run_requeued_six_times_is_one_tracker_run(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    epochs = 400
    (tmp_path / "long.yaml").write_text(SPIRAL % epochs)
    job = submit(devcluster, tmp_path, "--profile", "local", "--gpus-per-node", "1",
                 "--time", "5", "--grace", "10", "--config", "long.yaml")
    run_dir, job_id = Path(job["run_dir"]), str(job["job_id"])
    ids = []
    for segment in range(1, 7):
        _warn(devcluster, run_dir, segment, job_id)
        ids.append(_tracker(run_dir)["id"])
    row = wait_while_training(devcluster, job)
    assert row["State"] == "COMPLETED", Path(job["stdout"]).read_text()
    assert set(ids) == {_tracker(run_dir)["id"]}
    assert_one_run(run_dir, 7, epochs)
    assert {s["slurm_job_id"] for s in _tracker(run_dir)["starts"]} == {job_id}


def test_a_chain_of_three_segments_is_one_tracker_run(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    # Two ranks: rank 0 alone writes the tracker file while the other starts beside it.
    epochs = 150
    (tmp_path / "chain.yaml").write_text(SPIRAL % epochs)
    job = submit(devcluster, tmp_path, "--profile", "local", "--gpus-per-node", "2",
                 "--time", "5", "--grace", "10", "--no-requeue", "--chain", "3",
                 "--config", "chain.yaml")
    ids, run_dir = [str(i) for i in job["chain"]], Path(job["run_dir"])
    _warn(devcluster, run_dir, 1, ids[0])
    first = _tracker(run_dir)["id"]
    _warn(devcluster, run_dir, 2, ids[1])
    rows = [devcluster.wait_job(i, timeout_s=300) for i in ids]
    assert [r["State"] for r in rows] == ["COMPLETED"] * 3
    assert _tracker(run_dir)["id"] == first
    assert_one_run(run_dir, 3, epochs)
    assert [s["slurm_job_id"] for s in _tracker(run_dir)["starts"]] == ids


def test_a_sweep_points_requeue_is_one_tracker_run(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    user = User(devcluster, tmp_path)
    (user.cwd / "points.yaml").write_text(
        "- {trainer.max_epochs: 100, data.samples: 8192, trainer.batch_size: 256}\n")
    done = user.json("sweep", "--profile", "local", "--task", "spiral", "--points",
                     "points.yaml", "--gpus-per-node", "1", "--time", "5", "--grace", "10",
                     "--no-monitor", "--name", "tracker-one", "--json")
    ((array_id, *_),) = done["arrays"]
    point = Path(done["run_dir"]) / "points" / "000"
    _warn(devcluster, point, 1, f"{array_id}_0")
    first = _tracker(point)["id"]
    wait_for(lambda: (point / "training-complete").exists(), 300, "the point's completion")
    assert _tracker(point)["id"] == first
    assert_one_run(point, 2, 100)
