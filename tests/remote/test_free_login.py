"""`hpctrain free` through a login (loopback sshd): the same partitions, windows and usage as
here, in two remote commands (the partitions and windows, then the usage) and one per
candidate's `sbatch --test-only`, all over the profile's one connection (issue 42)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

from tests.conftest import DevClusterHandle
from tests.remote.conftest import Laptop, Sshd


def test_free_through_a_login_says_what_it_says_here(
        devcluster: DevClusterHandle, sshd: Sshd, laptop: Callable[..., Laptop]) -> None:
    lap = laptop(str(sshd.remote_home / "free proj"))
    lap.ok("login", "remote")
    before = len(sshd.commands())
    there = json.loads(lap.ok("free", "-P", "remote", "--nodes", "2", "--gpus-per-node", "1",
                              "--json").stdout)
    # Two round trips for the cluster, one for the one candidate (its one partition).
    assert len(sshd.commands()) == before + 3, sshd.commands()[before:]
    here = json.loads(subprocess.run(
        [sys.executable, "-m", "hpctrain", "free", "-P", "local", "--nodes", "2",
         "--gpus-per-node", "1", "--json"], capture_output=True, text=True, check=True,
        timeout=120, cwd=lap.project,
        env={**lap.env, "SLURM_CONF": str(devcluster.slurm_conf)}).stdout)
    (view_there,), (view_here,) = there["profiles"], here["profiles"]
    assert [p["partition"] for p in view_there["partitions"]] == [
        p["partition"] for p in view_here["partitions"]]
    assert view_there["maintenance"] == view_here["maintenance"] == []
    accounts = {a["account"] for a in view_there["usage"]["accounts"]}
    assert accounts == {a["account"] for a in view_here["usage"]["accounts"]}
    assert view_there["usage"]["accounting_unavailable"] is None
    (candidate,) = there["candidates"]
    assert candidate["check"]["accepted"] and candidate["topology"] == "2x1", candidate
    # render --check asks the profile's SLURM through its login as well.
    before = len(sshd.commands())
    checked = json.loads(lap.ok("render", "-P", "remote", "--check", "--json").stdout)
    (one,) = checked["alternatives"]
    assert one["check"]["accepted"] and checked["usage"]["accounts"], checked
    assert len(sshd.commands()) > before
