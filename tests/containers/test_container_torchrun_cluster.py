"""`--launcher torchrun` in a container on the dev cluster (issue 56): each node's torchrun runs
inside Charliecloud's `ch-run` (found on the PATH inside: the job's venv is bound in), reads its
endpoint from PET_RDZV_ENDPOINT, which srun's wrapper sets outside, and spawns its workers in
the image. Checked from outside, through /proc/PID/root: the agents and every worker hold the
image's marker and Debian 13 (this host is Debian 12). A SIGKILLed worker of one's own DDP
script is started again by the supervisor, in the container, on a fresh endpoint.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hpctrain.values.attempts import END, RESTART, parse_attempts
from hpctrain.values.rundir import RunDir
from tests.containers.image import MARKER, container_image, image_stamp
from tests.containers.test_container_cluster import _hpctrain
from tests.waits import wait_for

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@dataclass(frozen=True)
class Seen:
    """One process of the job, read from outside: what it is and what its root holds."""

    kind: str  # "agent" (torchrun), "worker" (one of its ranks) or "monitor"
    rank: str
    attempt: str
    root: str  # the image's marker, "|", its /etc/debian_version


def _seen(pid: str, needle: bytes) -> Seen | None:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    if needle not in environ:
        return None
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    env = dict(e.decode(errors="replace").split("=", 1) for e in environ if b"=" in e)
    # Python processes only: srun's `sh -c` and ch-run are the agents' pids before their exec.
    if not os.path.basename(argv[0]).startswith(b"python"):
        return None
    if len(argv) > 1 and argv[1].endswith(b"/torchrun"):
        kind = "agent"
    elif "LOCAL_RANK" in env and "TORCHELASTIC_RUN_ID" in env:
        kind = "worker"
    elif b"hpctrain.monitor" in argv:
        kind = "monitor"
    else:
        return None  # the batch script's and the supervisor's own Python, outside by design
    root = Path(f"/proc/{pid}/root")
    marker = (root / MARKER).read_text() if (root / MARKER).exists() else ""
    return Seen(kind, env.get("RANK", ""), env.get("HPCTRAIN_ATTEMPT", ""),
                marker + "|" + (root / "etc/debian_version").read_text())


@contextmanager
def _watching(run_dir: str) -> Iterator[dict[int, Seen]]:
    """Every Python process of the job (by its run directory), read five times a second."""
    needle = f"HPCTRAIN_RUN_DIR={run_dir}".encode()
    seen: dict[int, Seen] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.2):
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    if (got := _seen(pid, needle)) is not None:
                        seen[int(pid)] = got
                except OSError:
                    continue

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield seen
    finally:
        stop.set()
        watcher.join()


def _inside(seen: dict[int, Seen], kind: str, attempt: str = "0") -> list[str]:
    """The ranks (agents: "") of `kind` in `attempt` whose root is the image (Debian 13)."""
    stamp = image_stamp()
    return sorted(s.rank for s in seen.values() if s.kind == kind and s.attempt == attempt
                  and s.root.startswith(stamp) and "|13." in s.root)


def _kinds(seen: dict[int, Seen]) -> dict[str, int]:
    """How many agents and workers were seen (the monitor's processes vary: its summary too)."""
    return dict(Counter(s.kind for s in seen.values() if s.kind != "monitor"))


def _submit(dc: DevClusterHandle, cwd: Path, *args: str) -> dict[str, Any]:
    sub = _hpctrain(dc, cwd, "submit", "--json", "--profile", "local", "--nodes", "2",
                    "--launcher", "torchrun", "--container", str(container_image()), *args)
    assert sub.returncode == 0, sub.stderr
    job: dict[str, Any] = json.loads(sub.stdout)
    return job


def test_the_packaged_trainer_under_torchrun_runs_every_worker_inside_the_container(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    # Three epochs: where the processes run is what is tested (the suite's CPU is shared).
    job = _submit(devcluster, tmp_path, "--max-epochs", "3")
    run_dir = Path(job["run_dir"])
    with _watching(str(run_dir)) as seen:
        row = devcluster.wait_job(str(job["job_id"]), timeout_s=180)
    assert row["State"] == "COMPLETED", Path(job["stderr"]).read_text()
    assert RunDir(run_dir).training_complete.exists()
    metrics = json.loads(RunDir(run_dir).metrics.read_text())
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2, 3], metrics

    # One torchrun a node and its two workers, all in the image; none seen on the host's root.
    assert _inside(seen, "agent") == ["", ""], seen
    assert _inside(seen, "worker") == ["0", "1", "2", "3"], seen
    assert _kinds(seen) == {"agent": 2, "worker": 4}, seen
    # The monitor stayed outside, on the node's own root (Debian 12), and wrote its summary.
    monitors = [s.root for s in seen.values() if s.kind == "monitor"]
    assert monitors and all(root.startswith("|12.") for root in monitors), seen
    assert json.loads(RunDir(run_dir).monitor_summary.read_text())
    script = RunDir(run_dir).script.read_text()
    assert '"${hpctrain_container[@]}" torchrun \\' in script
    assert 'export PET_RDZV_ENDPOINT="$MASTER_ADDR:$MASTER_PORT"' in script


# A DDP script of one's own: each step all-reduces each rank's rank + 1 (10 over 4 ranks) and
# reports its step (hpctrain.progress: the kill below waits for it); rank 0 writes the sum.
DDP_SUM = """\
import json, os, sys, time
from pathlib import Path

import torch
import torch.distributed as dist
from hpctrain.progress import report

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
total = 0.0
for step in range(int(sys.argv[1])):
    x = torch.tensor([float(rank + 1)])
    dist.all_reduce(x)
    total += x.item()
    report(step)
    time.sleep(0.05)
if rank == 0:
    out = Path(os.environ["HPCTRAIN_RUN_DIR"]) / "ddp-sum.json"
    out.write_text(json.dumps({"attempt": os.environ["HPCTRAIN_ATTEMPT"], "world": world,
                               "total": total}))
dist.destroy_process_group()
"""


def _rank_pid(run_dir: Path, rank: int, step: int) -> int | None:
    """The pid the rank hook registered for `rank`, once some rank reported `step`."""
    rows = []
    for path in [*RunDir(run_dir).progress_dir.glob("*.json"),
                 *RunDir(run_dir).ranks_dir.glob("*.json")]:
        try:
            rows.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    if max((int(r["step"]) for r in rows if "step" in r), default=-1) < step:
        return None
    return next((int(r["pid"]) for r in rows if "step" not in r and r.get("rank") == rank),
                None)


def test_a_ddp_script_of_ones_own_restarts_inside_the_container_after_a_worker_is_killed(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    (tmp_path / "ddp_sum.py").write_text(DDP_SUM)
    job = _submit(devcluster, tmp_path, "--gpus-per-node", "2", "--restarts", "1", "--time",
                  "5", "--", "python", "ddp_sum.py", "60")
    run_dir = Path(job["run_dir"])
    with _watching(str(run_dir)) as seen:
        pid = wait_for(lambda: _rank_pid(run_dir, 2, 20), 120, "rank 2 at step 20")
        os.kill(pid, signal.SIGKILL)
        killed = time.time()
        row = devcluster.wait_job(str(job["job_id"]), timeout_s=180)
    err = Path(job["stderr"]).read_text()
    assert row["State"] == "COMPLETED", err
    first, second = parse_attempts(RunDir(run_dir).attempts.read_text())
    assert (first.then, second.then, second.cause) == (RESTART, END, "completed"), err
    assert first.port != second.port and first.ended >= killed - 1, (first, second)
    # The whole run again in attempt 1: 60 steps of 1 + 2 + 3 + 4.
    assert json.loads((run_dir / "ddp-sum.json").read_text()) == {
        "attempt": "1", "world": 4, "total": 600.0}
    # The killed pid was rank 2's worker inside the image; both attempts ran wholly inside.
    assert (seen[pid].kind, seen[pid].rank, seen[pid].attempt) == ("worker", "2", "0"), seen
    for attempt in ("0", "1"):
        assert _inside(seen, "agent", attempt) == ["", ""], seen
        assert _inside(seen, "worker", attempt) == ["0", "1", "2", "3"], seen
    assert _kinds(seen) == {"agent": 4, "worker": 8}, seen
