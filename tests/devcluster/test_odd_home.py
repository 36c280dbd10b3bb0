"""A dev cluster under an HPCTRAIN_HOME with spaces, quotes and SLURM's special characters."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpctrain.devcluster.layout import Layout, is_plain
from hpctrain.devcluster.processes import cmdline
from tests.conftest import DevClusterHandle, devcluster_dir

pytestmark = pytest.mark.cluster
ODD_NAME = "it's a \"home\" #1, 100% odd"


@pytest.fixture
def odd_home(devcluster: DevClusterHandle, tmp_path: Path) -> Iterator[DevClusterHandle]:
    """The shared cluster stopped (the ports are fixed), a cluster under an odd home instead."""
    home = tmp_path / ODD_NAME
    directory = devcluster_dir(home)
    handle = DevClusterHandle(home, directory, directory / "etc" / "slurm.conf", "local")
    assert devcluster.cli("devcluster", "down").returncode == 0
    try:
        yield handle
    finally:
        handle.cli("devcluster", "down")
        res = devcluster.cli("devcluster", "up", timeout_s=120)
        assert res.returncode == 0, res.stderr


def test_up_job_and_down_under_a_home_with_spaces_and_quotes(odd_home: DevClusterHandle,
                                                            tmp_path: Path) -> None:
    res = odd_home.cli("devcluster", "up", timeout_s=120)
    assert res.returncode == 0, res.stderr
    # The printed line works when pasted into a shell.
    export = next(ln for ln in res.stdout.splitlines() if ln.startswith("export "))
    echo = subprocess.run(["bash", "-c", f'{export}; printf %s "$SLURM_CONF"'],
                          capture_output=True, text=True, check=True)
    assert echo.stdout == str(odd_home.slurm_conf)
    named = Layout.for_dir(odd_home.directory).as_named()
    assert is_plain(named.root) and named.root.resolve() == odd_home.directory.resolve()
    assert ODD_NAME not in odd_home.slurm_conf.read_text()

    work = tmp_path / "job dir 'x'"
    work.mkdir()
    script = work / "a job.sh"
    script.write_text('#!/bin/bash\necho "conf=$SLURM_CONF"\nsrun hostname\n')
    job = odd_home.sbatch(script, "--output=out %j.txt")
    assert odd_home.wait_job(job)["State"] == "COMPLETED"
    assert f"conf={odd_home.slurm_conf}" in (work / f"out {job}.txt").read_text()

    st = json.loads(odd_home.cli("devcluster", "status", "--json").stdout)
    assert st["healthy"], st
    _paths_arrived_whole(odd_home, {d["name"]: d["pid"] for d in st["daemons"]})
    assert odd_home.cli("devcluster", "down").returncode == 0
    assert not any(d["alive"] for d in
                   json.loads(odd_home.cli("devcluster", "status", "--json").stdout)["daemons"])



def _paths_arrived_whole(dc: DevClusterHandle, pids: dict[str, int]) -> None:
    """mysql_install_db (a shell script) and the daemons got the odd paths in one piece."""
    db = dc.directory / "db"
    assert (db / "mysql").is_dir()
    log = (dc.directory / "log" / "mysql_install_db.log").read_text()
    assert "Cannot change ownership" not in log
    assert f"--datadir={db}" in cmdline(pids["mysqld"])
    assert str(dc.slurm_conf) in cmdline(pids["slurmctld"])
