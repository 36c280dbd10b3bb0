"""`--first-of` across profiles on the dev cluster (issue 42): one race per profile, each through
the pipeline at its place, and the watcher on this machine that cancels the other profile's
alternative once one has started. Two profiles of one cluster stand in for two clusters: the
watcher asks each alternative's SLURM through its own place and knows nothing else of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import DevClusterHandle
from tests.jobs.test_jobs_cluster import Cli
from tests.waits import wait_for

pytestmark = [pytest.mark.cluster]


def test_the_profile_that_starts_first_wins_and_the_other_is_cancelled(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    cli = Cli(devcluster, tmp_path, HPCTRAIN_RACE_POLL_S="1")
    profiles = cli.home / "config" / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "other.yaml").write_text("extends: local\nname: other\n")
    # node1's GPUs held for 10 minutes: the 2x2 in `local` cannot start before; the 1x1 in
    # `other` (5 minutes, on node2) can, backfilled ahead of it.
    blocker = cli.submit("--gpus-per-node", "2", "--time", "10",
                         "--sbatch-arg=--nodelist=node1", "--", "sleep", "300")
    cli.wait(str(blocker["job_id"]), lambda j: j["state"] == "RUNNING", 120)
    try:
        seen = json.loads(cli.ok("free", "--first-of", "2x2,1x1@other", "--profile", "local",
                                 "--time", "5", "--json").stdout)
        ranked = [(c["profile"], c["topology"]) for c in seen["candidates"]]
        # free looks at the named profile too; the 2x2 would be tried in each profile.
        assert ranked[0] == ("other", "1x1") and ("local", "2x2") in ranked, ranked
        dry = json.loads(cli.ok("submit", "--profile", "local", "--first-of", "2x2,1x1@other",
                                "--time", "5", "--dry-run", "--json", "--", "sleep", "20"
                                ).stdout)
        assert [p["profile"] for p in dry["profiles"]] == ["local", "other"], dry
        assert dry["watcher"] is None and all(p["scripts"] for p in dry["profiles"])
        got = json.loads(cli.ok("submit", "--profile", "local", "--first-of", "2x2,1x1@other",
                                "--time", "5", "--json", "--", "sleep", "20").stdout)
        (local,), (other,) = ([a["job_id"] for a in p["alternatives"]]
                              for p in got["profiles"])
        log = Path(got["watcher"]["log"])
        said = wait_for(lambda: log.read_text() if log.exists() else "", 120,
                        "the watcher's verdict", until=lambda text: "started first" in text)
        assert "other started first; cancelled 1 job(s) elsewhere: " + local in said, said
        assert cli.wait(local, lambda j: j["terminal"])["state"] == "CANCELLED"
        assert cli.wait(other, lambda j: j["terminal"])["state"] == "COMPLETED"
    finally:
        cli.ok("cancel", str(blocker["job_id"]))


def test_a_profile_that_cannot_run_it_leaves_nothing_queued(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    """Every profile's race is planned before any is queued: a refusal queues nothing."""
    cli = Cli(devcluster, tmp_path)
    profiles = cli.home / "config" / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "other.yaml").write_text("extends: local\nname: other\n")
    # The dev cluster's nodes have 2 GPUs: the second profile's alternative is impossible.
    res = cli("submit", "--profile", "local", "--first-of", "1x1,1x3@other", "--time", "5",
              "--json", "--", "true")
    assert res.returncode == 1 and "1x3@other" in json.loads(res.stdout)["error"]["what"]
    assert json.loads(cli.ok("status", "--all", "--json").stdout)["jobs"] == []
