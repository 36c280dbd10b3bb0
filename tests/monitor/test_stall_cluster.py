"""The stall watcher on the dev cluster (issue 41): a 2-node gloo job whose rank 1 hangs in its
own code while rank 0 waits in all_reduce under an hour's collective timeout is found stalled
within its window, every rank's stack is kept, the job ends long before its time limit, `why`
names the rank, its node and its frame, and the node is remembered (`hpctrain nodes`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hpctrain import rundir
from tests.conftest import DevClusterHandle
from tests.jobs.test_jobs_cluster import Cli

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
PROGRAM = Path(__file__).resolve().parents[2] / "examples" / "stall" / "hang_in_collective.py"


def test_a_rank_hung_outside_the_collective_is_caught_named_and_ended(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    cli = Cli(devcluster, tmp_path)
    shutil.copy(PROGRAM, cli.cwd / PROGRAM.name)
    job = cli.submit("--nodes", "2", "--gpus-per-node", "1", "--time", "10", "--stall-window", "20",
                     "--", "python", PROGRAM.name)
    ended = cli.wait(str(job["job_id"]), lambda j: j["terminal"], 300)
    assert ended["state"] == "CANCELLED", ended
    assert ended["verdict"] == "stalled"
    # Found within its window (20 s after the last report, checked every 5 s), not at 10 min.
    assert ended["elapsed_s"] < 180, ended
    run_dir = Path(job["run_dir"])
    report = json.loads((run_dir / rundir.STALL_REPORT).read_text())
    assert len(report["nodes"]) == 2 and report["action"] == "cancel"
    stacks = sorted(p.name for p in (run_dir / rundir.STALL_DIR).glob("*.txt"))
    assert len(stacks) == 2, stacks

    got = json.loads(cli.ok("why", str(job["job_id"]), "--json").stdout)
    assert got["cause"] == "stalled", got
    hung = next(r for v in report["nodes"] for r in v["ranks"] if r["rank"] == 1)
    assert (f"rank 1 on {hung['node']} never entered a collective; it was in load_next_shard "
            f"({PROGRAM.name}:") in got["summary"], got["summary"]
    assert "rank 0 waited in all_reduce" in got["summary"]
    assert "before its time limit" in got["summary"]

    held = json.loads(cli.ok("nodes", "--json").stdout)["nodes"]
    assert [(n["node"], n["reasons"]) for n in held] == [(hung["node"], ["stall"])]
