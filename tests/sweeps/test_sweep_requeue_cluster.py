"""A sweep whose long point gets the time limit's warning: it requeues itself, and only itself.

In a job array one task's SLURM_JOB_ID is the array's own id (the last task to start keeps
it), and `scontrol requeue <array id>` requeues every task of the array: finished points ran
again after each requeue of the long one (7 times each in the issue's 3-point sweep).
The batch script requeues ARRAYID_TASK instead; sacct --duplicates shows each run of a task.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DevClusterHandle
from tests.options.helpers import User

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# The long point is the last task of the array, the one that keeps the array's id. The warning
# is sent as SLURM sends it (USR1 to the task's batch shell, --signal=B:USR1) once it has saved
# an epoch, not by a real 1-minute limit: the timer is tests/cluster/test_requeue.py's, and a
# faster trainer finished this point's 1,000 epochs inside its first minute (a fresh-clone CI
# run failed so). The short points train one epoch of 2,000 samples.
POINTS = """\
- {trainer.max_epochs: 1, data.samples: 2000}
- {trainer.max_epochs: 1, data.samples: 2001}
- {trainer.max_epochs: 300, data.samples: 16384, trainer.batch_size: 256}
"""


def _runs(dc: DevClusterHandle, array_id: str) -> dict[str, list[str]]:
    """Each task's runs (sacct --duplicates: one row a start), as their states, by task id."""
    out = dc.client().run(["sacct", "--duplicates", "-X", "-n", "-P", "-j", array_id,
                           "-o", "JobID,State"]).stdout
    runs: dict[str, list[str]] = {}
    for line in out.splitlines():
        job, _, state = line.partition("|")
        if job.startswith(f"{array_id}_") and job[len(array_id) + 1:].isdigit():
            runs.setdefault(job[len(array_id) + 1:], []).append(state.split()[0])
    return runs


def _epochs(point_dir: Path) -> int:
    path = point_dir / "metrics.json"
    return int(json.loads(path.read_text())["epochs_completed"]) if path.exists() else 0


def _wait_all_done(dc: DevClusterHandle, array_id: str, long_dir: Path,
                   stall_s: float = 300.0) -> dict[str, list[str]]:
    """The tasks' runs once all three are COMPLETED, waited for while the long one trains."""
    done, since = -1, time.monotonic()
    while True:
        runs = _runs(dc, array_id)
        if len(runs) == 3 and all(r[-1] == "COMPLETED" for r in runs.values()):
            return runs
        now = _epochs(long_dir)
        if now > done:
            done, since = now, time.monotonic()
        assert time.monotonic() - since < stall_s, f"the long point stalled: {runs}"
        time.sleep(2)


def _metrics(point_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((point_dir / "metrics.json").read_text())
    return data


def _wait_for(path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"no {path} after {timeout_s} s"
        time.sleep(0.5)


def test_a_point_warned_of_its_limit_requeues_only_itself(
    devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    user = User(devcluster, tmp_path)
    (user.cwd / "points.yaml").write_text(POINTS)
    done = user.json("sweep", "--profile", "local", "--task", "spiral", "--points",
                     "points.yaml", "--gpus-per-node", "1", "--time", "5", "--grace", "10",
                     "--no-monitor", "--name", "requeue-one", "--json")
    (array,) = done["arrays"]
    array_id = array[0]
    points = Path(done["run_dir"]) / "points"
    _wait_for(points / "002" / "last.ckpt", 300)
    devcluster.client().run(["scancel", "--batch", "--signal=USR1", f"{array_id}_2"])
    runs = _wait_all_done(devcluster, array_id, points / "002")
    logs = {p.name: p.read_text() for p in (Path(done["run_dir"]) / "task-logs").glob("*.out")}
    long_log = "".join(t for n, t in logs.items() if n.endswith(f"{array_id}_2.out"))
    # The short points ran once each, whatever the long one did.
    assert Counter(len(r) for t, r in runs.items() if t != "2") == {1: 2}, (runs, logs)
    # The long one spanned segments: each a requeue of its own, named by its array task.
    long = _metrics(points / "002")
    stops = [r for r in long["restarts"] if r["end"] and r["end"]["how"] == "stopped"]
    assert len(stops) == 1 and len(runs["2"]) == 2, (runs, long["restarts"])
    assert long_log.count(f"requeueing job {array_id}_2") == len(stops), long_log
    assert [e["epoch"] for e in long["epochs"]] == list(range(1, 301))
    for short in ("0", "1"):
        assert len(_metrics(points / f"00{short}")["restarts"]) == 1
