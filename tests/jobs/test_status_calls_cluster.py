"""How many SLURM commands `status` runs (issue 43): squeue and sacct, and `sinfo --version`
only the first time a sinfo binary is met (slurm/versioncache.py). Counted as processes, by
wrappers first on PATH that log each call and run the real command."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from tests.conftest import DevClusterHandle
from tests.jobs.test_jobs_cluster import Cli
from tests.waits import wait_for

pytestmark = [pytest.mark.cluster]


def _wrapped(tmp_path: Path) -> tuple[Path, Path]:
    """A PATH folder of logging wrappers around sinfo, squeue and sacct; their log."""
    folder, log = tmp_path / "wrappers", tmp_path / "calls.log"
    folder.mkdir()
    for name in ("sinfo", "squeue", "sacct", "scontrol"):
        real = shutil.which(name)
        assert real is not None, name
        script = folder / name
        script.write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\nexec "{real}" "$@"\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder, log


def test_status_asks_squeue_and_sacct_and_the_version_once(
        devcluster: DevClusterHandle, tmp_path: Path) -> None:
    folder, log = _wrapped(tmp_path)
    cli = Cli(devcluster, tmp_path, PATH=f"{folder}{os.pathsep}{os.environ['PATH']}")
    first = cli.submit("--", "sleep", "300")
    cli.ok("status", "--json")  # meets this sinfo for the first time: asks its version
    assert sum(line.startswith("sinfo --version") for line in log.read_text().splitlines()) == 1
    done = [str(cli.submit("--", "true")["job_id"]) for _ in range(3)]
    client = devcluster.client()
    wait_for(lambda: client.squeue(done), 120, "the short jobs to leave the queue",
             until=lambda live: not any(j.state.value in ("PENDING", "RUNNING")
                                        for j in live.values()))
    # slurmdbd records a job a moment after it ended: until then status asks scontrol too.
    wait_for(lambda: client.sacct(done), 60, "the short jobs in the accounting",
             until=lambda known: set(known) >= set(done))
    cli.ok("cancel", str(first["job_id"]))
    log.write_text("")
    listing = json.loads(cli.ok("status", "--all", "--json").stdout)
    assert {str(j["job_id"]) for j in listing["jobs"]} >= set(done)
    calls = [line.split()[0] for line in log.read_text().splitlines()]
    # squeue always; sacct for the jobs squeue has forgotten (MinJobAge), if any; never sinfo.
    assert calls[0] == "squeue" and sorted(calls) in (["squeue"], ["sacct", "squeue"]), calls
