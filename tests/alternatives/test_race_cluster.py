"""`submit --first-of` on the real dev cluster (profile local: 2 nodes x 2 emulated GPUs)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.jobs.helpers import cluster_env, hpctrain

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = pytest.mark.cluster
# What the "training" prints: each task of the job that won says it once.
TRAIN = ["--", "bash", "-c", "echo TRAINED job=$SLURM_JOB_ID nodes=$SLURM_JOB_NUM_NODES"]


class Race:
    """hpctrain against the dev cluster with a history and working directory of its own."""

    def __init__(self, cluster: DevClusterHandle, tmp_path: Path) -> None:
        self.cluster = cluster
        self.cwd = tmp_path / "work"
        self.cwd.mkdir()
        self.env = cluster_env(cluster.slurm_conf, tmp_path / "home", COLUMNS="200")

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        res = hpctrain(*args, env=self.env, cwd=self.cwd)
        assert res.returncode == 0, f"hpctrain {' '.join(args)}:\n{res.stdout}\n{res.stderr}"
        return res

    def submit(self, first_of: str, *extra: str) -> dict[str, Any]:
        res = self.ok("submit", "-P", "local", "-t", "3", "--no-monitor", "--json",
                      "--first-of", first_of, *extra, *TRAIN)
        return dict(json.loads(res.stdout))

    @contextlib.contextmanager
    def occupied(self, gpus_per_node: int) -> Iterator[None]:
        """A sleeping job holds `gpus_per_node` GPUs on each node while the block runs."""
        busy = self.cluster.client().run(
            ["sbatch", "--parsable", "--nodes=2", "--ntasks-per-node=1", "--mem=500",
             f"--gres=gpu:emu:{gpus_per_node}", "--time=10", "--output=/dev/null",
             "--wrap", "sleep 300"]).stdout.strip()
        try:
            yield
        finally:
            self.cluster.client().scancel([busy])

    def ids(self, done: dict[str, Any]) -> dict[str, str]:
        return {a["topology"]: a["job_id"] for a in done["alternatives"]}

    def status(self, *ids: str) -> dict[str, Any]:
        return dict(json.loads(self.ok("status", *ids, "--json").stdout))

    def trained(self, run_dir: str) -> list[str]:
        return [line for f in sorted(Path(run_dir).glob("*.out"))
                for line in f.read_text().splitlines() if line.startswith("TRAINED")]


def wait_ended(race: Race, ids: list[str], timeout_s: float = 120.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout_s
    while True:
        jobs = race.status(*ids)["jobs"]
        states = {j["job_id"]: j["state"] for j in jobs}
        if all(j["terminal"] for j in jobs):
            return states
        assert time.monotonic() < deadline, f"race {ids} not over: {states}"
        time.sleep(2)


def test_one_gpu_busy_on_each_node_the_2x1_alternative_wins(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    race = Race(devcluster, tmp_path)
    with race.occupied(1):
        done = race.submit("1x2,2x1")
        ids = race.ids(done)
        states = wait_ended(race, list(ids.values()))
    assert states == {ids["2x1"]: "COMPLETED", ids["1x2"]: "CANCELLED"}
    run_dir = Path(done["run_dir"])
    # The claim and the cancel happened in the 2x1 job: its own log says so.
    log = (run_dir / f"hpctrain-{ids['2x1']}.out").read_text()
    assert f"job {ids['2x1']} (2x1) started first and claimed the run" in log
    assert f"cancelling the other alternatives: {ids['1x2']}" in log
    assert (run_dir / "race-claim" / "winner").read_text().split() == [ids["2x1"], "2x1"]
    assert race.trained(str(run_dir)) == [f"TRAINED job={ids['2x1']} nodes=2"] * 2
    assert not (run_dir / f"hpctrain-{ids['1x2']}.out").exists()
    # One line in the table, the winner's; --json has both with the race's facts.
    table = race.ok("status", ids["1x2"]).stdout.splitlines()
    assert len(table) == 2 and "[won of 1x2,2x1]" in table[1] and " 2x1 " in table[1]
    jobs = race.status(ids["1x2"])["jobs"]
    assert {j["race"]["winner"] for j in jobs} == {ids["2x1"]}


def test_two_alternatives_that_can_both_start_train_once(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    race = Race(devcluster, tmp_path)
    # 1x1 and 2x1 fit side by side on the idle cluster: both start in the same pass.
    done = race.submit("1x1,2x1")
    ids = race.ids(done)
    wait_ended(race, list(ids.values()))
    winner = (Path(done["run_dir"]) / "race-claim" / "winner").read_text().split()
    assert winner[0] in ids.values()
    lines = race.trained(done["run_dir"])
    assert lines and {line.split()[1] for line in lines} == {f"job={winner[0]}"}


def test_cancel_one_alternative_cancels_the_race(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    race = Race(devcluster, tmp_path)
    with race.occupied(2):
        done = race.submit("1x2,2x1")
        ids = list(race.ids(done).values())
        pending = race.status(ids[1])["jobs"]
        assert {j["state"] for j in pending} == {"PENDING"}
        cancelled = json.loads(race.ok("cancel", ids[1], "--json").stdout)
        assert sorted(cancelled["cancelled"]) == sorted(ids)
        assert set(wait_ended(race, ids, 30).values()) == {"CANCELLED"}
    assert not (Path(done["run_dir"]) / "race-claim").exists()
