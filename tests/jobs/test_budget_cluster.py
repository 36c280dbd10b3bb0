"""A budget of GPU-hours on the dev cluster (issue 42): with a job of one's own holding GPUs, a
submit that would take the user over the profile's `budget_gpu_hours` is refused with the
numbers, and its fix is accepted; a rerun and a scaling study ask the same first."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import DevClusterHandle
from tests.jobs.test_jobs_cluster import Cli

pytestmark = [pytest.mark.cluster]


def _rerun_and_scale_ask_too(cli: Cli, holder: str) -> None:
    """The rerun's profile is the one its run directory kept (with the budget); the study's
    runs are each the base request with a topology."""
    # Alone, each fits in the budget (0.42 and at most 1.0 GPU-hours): only what the holder
    # holds takes them over.
    for args in (("rerun", holder, "--nodes", "1", "--gpus-per-node", "1", "--time", "25"),
                 ("scale", "--profile", "mine", "--topologies", "1x1,1x2", "--time", "30",
                  "--max-epochs", "1")):
        refused = cli(*args, "--dry-run", "--json")
        assert refused.returncode == 1, (args, refused.stdout)
        what = json.loads(refused.stdout)["error"]["what"]
        assert re.search(r"over the budget of 1 GPU-hours .* jobs hold 0\.[67]", what), what


def test_a_submit_over_the_budget_is_refused_with_the_numbers(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    cli = Cli(devcluster, tmp_path)
    profiles = cli.home / "config" / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "mine.yaml").write_text("extends: local\nbudget_gpu_hours: 1\n")
    holder = json.loads(cli.ok("submit", "--profile", "mine", "--nodes", "2",
                               "--gpus-per-node", "2", "--time", "10", "--json", "--",
                               "sleep", "300").stdout)
    try:
        refused = cli("submit", "--profile", "mine", "--gpus-per-node", "1", "--time", "30",
                      "--json")
        assert refused.returncode == 1, refused.stdout
        what = json.loads(refused.stdout)["error"]["what"]
        assert re.search(r"over the budget of 1 GPU-hours on hpctrain-dev \(budget_gpu_hours "
                         r"in profile mine\): this job reserves 0\.5 GPU-hours at most and "
                         r"your queued and running jobs hold 0\.[67]", what), what
        fix = re.search(r"use --time (\S+),", what)
        assert fix is not None, what
        ok = cli.ok("submit", "--profile", "mine", "--gpus-per-node", "1", "--time",
                    fix.group(1), "--dry-run", "--json")
        assert json.loads(ok.stdout)["plan"]["gpu_hours"] <= 0.34
        _rerun_and_scale_ask_too(cli, str(holder["job_id"]))
    finally:
        cli.ok("cancel", str(holder["job_id"]))
