"""`submit --first-of` across partitions (issue 42), on the dev cluster emulating Raven: with
gpudev's nodes busy, the alternative in gpu starts, claims the run and cancels the one in
gpudev."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.alternatives.test_race_cluster import TRAIN, Race, wait_ended

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = pytest.mark.cluster


def test_the_partition_that_starts_first_wins_and_cancels_the_other(
        devcluster_with: Callable[..., DevClusterHandle], tmp_path: Path) -> None:
    dc = devcluster_with("raven", nodes=2)
    race = Race(dc, tmp_path)
    busy = dc.client().run(
        ["sbatch", "--parsable", "--partition=gpudev", "--nodes=1", "--exclusive",
         "--nodelist=gpu1", "--time=10", "--output=/dev/null", "--wrap", "sleep 300"],
    ).stdout.strip()
    other = dc.client().run(
        ["sbatch", "--parsable", "--partition=gpudev", "--nodes=1", "--exclusive",
         "--nodelist=gpu2", "--time=10", "--output=/dev/null", "--wrap", "sleep 300"],
    ).stdout.strip()
    try:
        res = race.ok("submit", "-P", "raven", "-t", "3", "--no-monitor", "--json",
                      "--first-of", "gpudev:1x4,gpu:1x4", *TRAIN)
        done = json.loads(res.stdout)
        ids = race.ids(done)
        states = wait_ended(race, list(ids.values()))
    finally:
        dc.client().scancel([busy, other])
    assert states == {ids["gpu:1x4"]: "COMPLETED", ids["gpudev:1x4"]: "CANCELLED"}, states
    run_dir = Path(done["run_dir"])
    assert sorted(p.name for p in run_dir.glob("job-*.sbatch")) == [
        "job-gpu-1x4.sbatch", "job-gpudev-1x4.sbatch"]
    log = (run_dir / f"hpctrain-{ids['gpu:1x4']}.out").read_text()
    assert f"job {ids['gpu:1x4']} (gpu:1x4) started first and claimed the run" in log
    assert race.trained(str(run_dir)) == [f"TRAINED job={ids['gpu:1x4']} nodes=1"] * 4
