"""Every submission kind, here and through a login, by the one pipeline: the same answers."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import DevClusterHandle
from tests.remote.conftest import Laptop, Sshd

KINDS = {"job": (), "chain": ("--chain", "2"), "race": ("--first-of", "1x1,2x1")}
# What only a submission through a login adds to submit's JSON.
LOGIN_KEYS = {"login", "synced_files", "ssh_round_trips"}


def _here(lap: Laptop, devcluster: DevClusterHandle, *args: str) -> dict[str, object]:
    """`hpctrain ARGS` (with --json) in the laptop's project, the dev cluster's SLURM here."""
    env = {**lap.env, "SLURM_CONF": str(devcluster.slurm_conf)}
    res = subprocess.run([sys.executable, "-m", "hpctrain", *args], env=env,
                         cwd=lap.project, capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL, check=False)
    assert res.returncode == 0, res.stderr
    return dict(json.loads(res.stdout))


def _there(lap: Laptop, *args: str) -> dict[str, object]:
    return dict(json.loads(lap.ok(*args).stdout))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_kind_here_and_through_a_login(
    kind: str, devcluster: DevClusterHandle, sshd: Sshd, laptop: Callable[..., Laptop],
    tmp_path: Path,
) -> None:
    workdir = sshd.remote_home / f"kind {kind}"
    lap = laptop(str(workdir))
    lap.ok("login", "remote")
    job = ("--json", "--time", "1", *KINDS[kind], "--", "true")
    dry_here = _here(lap, devcluster, "submit", "--profile", "local", "--dry-run", *job)
    dry_there = _there(lap, "submit", "--profile", "remote", "--dry-run", *job)
    assert dry_here.keys() == dry_there.keys() and dry_here["dry_run"] is True
    assert str(dry_there["run_dir"]).startswith(str(workdir) + "/")

    here = _here(lap, devcluster, "submit", "--profile", "local", *job)
    there = _there(lap, "submit", "--profile", "remote", *job)
    assert there.keys() == here.keys() | LOGIN_KEYS and not LOGIN_KEYS & here.keys()
    assert there["login"] == "testlogin" and int(str(there["synced_files"])) >= 1
    for done in (here, there):
        run_dir = Path(str(done["run_dir"]))
        assert (run_dir / "run.json").is_file(), run_dir
        assert done["cluster"] == devcluster.client().cluster_name()
    if kind == "chain":
        assert len(here["chain"]) == len(there["chain"]) == 2  # type: ignore[arg-type]
    if kind == "race":
        for done in (here, there):
            assert (Path(str(done["run_dir"])) / "alternatives.txt").read_text().count("\n") == 2
    # Both went into the laptop's history, the login's with its destination.
    rows = _here(lap, devcluster, "status", "--all", "--json")["jobs"]
    logins = {str(r["job_id"]): r.get("login") for r in rows}  # type: ignore[attr-defined]
    assert logins[str(there["job_id"])] == "testlogin" and logins[str(here["job_id"])] is None


def test_probe_here_and_through_a_login(
    devcluster: DevClusterHandle, sshd: Sshd, laptop: Callable[..., Laptop],
) -> None:
    lap = laptop(str(sshd.remote_home / "probe"))
    lap.ok("login", "remote")
    dry_here = _here(lap, devcluster, "profiles", "probe", "local", "--dry-run", "--json")
    dry_there = _there(lap, "profiles", "probe", "remote", "--dry-run", "--json")
    assert dry_here.keys() == dry_there.keys() and dry_there["dry_run"] is True
    assert not Path(str(dry_there["run_dir"])).exists()
    here = _here(lap, devcluster, "profiles", "probe", "local", "--json")
    there = _there(lap, "profiles", "probe", "remote", "--json")
    # Sent through another destination by --login (its own master).
    sshd.add_alias("otherlogin")
    lap.ok("login", "otherlogin", "--ssh-config", str(sshd.client_config))
    sent = _there(lap, "profiles", "probe", "remote", "--login", "otherlogin", "--json")
    assert here.keys() == there.keys() == sent.keys()
    # The job ran on a dev cluster node and its output was read back over the master.
    for doc in (here, there, sent):
        assert doc["findings"]["host"], doc  # type: ignore[index]
    rows = _here(lap, devcluster, "status", "--all", "--json")["jobs"]
    logins = {str(r["job_id"]): r.get("login") for r in rows}  # type: ignore[attr-defined]
    assert logins[str(here["job_id"])] is None
    assert logins[str(there["job_id"])] == "testlogin"
    assert logins[str(sent["job_id"])] == "otherlogin"


STUDY = ("--topologies", "1x1", "--repeats", "1", "--max-epochs", "2", "--set",
         "data.samples=2000", "--time", "5", "--wait", "--json")


def test_study_here_and_through_a_login(
    devcluster: DevClusterHandle, sshd: Sshd, laptop: Callable[..., Laptop],
) -> None:
    lap = laptop(str(sshd.remote_home / "study"))
    sshd.add_alias("otherlogin")
    lap.ok("login", "otherlogin", "--ssh-config", str(sshd.client_config))
    here = _here(lap, devcluster, "scale", "--profile", "local", "--name", "here", *STUDY)
    there = _there(lap, "scale", "--profile", "remote", "--login", "otherlogin", "--name",
                   "there", *STUDY)
    assert here.keys() == there.keys()
    for table in (here, there):
        (run,) = table["runs"]  # type: ignore[misc]
        # Measured: metrics.json was read where the run was, here or over the master.
        assert run["state"] == "COMPLETED" and run["samples_per_s"] > 0, run["error"]
    # The table and plot stay on this machine, under the study's own directory.
    assert Path(str(there["directory"])).is_relative_to(lap.project)
    # scale-report finds the login from the study's runs and reads their files there again.
    again = _there(lap, "scale-report", "there", "--json")
    assert again["runs"][0]["samples_per_s"] == there["runs"][0]["samples_per_s"]  # type: ignore[index]
    rows = _here(lap, devcluster, "status", "--all", "--json")["jobs"]
    logins = {str(r["job_id"]): r.get("login") for r in rows}  # type: ignore[attr-defined]
    assert logins[str(there["runs"][0]["job_id"])] == "otherlogin"  # type: ignore[index]
    assert logins[str(here["runs"][0]["job_id"])] is None  # type: ignore[index]
