"""A dead (SIGKILL) or stopped (SIGSTOP) slurmctld on the real dev cluster: every command
names it promptly, nothing is recorded as finished, and all is well once it is back.

Each test restores the controller in a `finally` (`hpctrain devcluster up` repairs the
cluster; SIGCONT for a stopped one). Run under the shared lock:
`flock /work/notes/devcluster.lock .venv/bin/pytest -q tests/jobs/test_dead_controller.py`.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .test_jobs_cluster import Cli

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = pytest.mark.cluster
CONTROLLER = "127.0.0.1:16817"


@pytest.fixture
def cli(devcluster: DevClusterHandle, tmp_path: Path) -> Cli:
    return Cli(devcluster, tmp_path)


def _answers(cluster: DevClusterHandle) -> bool:
    return cluster.client(timeout_s=5).run(["squeue"], check=False).returncode == 0


@contextmanager
def controller_stopped(cluster: DevClusterHandle, sig: int = signal.SIGKILL) -> Iterator[None]:
    """slurmctld killed (or stopped) for the block; back and answering after it."""
    pid = int((cluster.directory / "run" / "slurmctld.pid").read_text())
    os.kill(pid, sig)
    try:
        yield
    finally:
        if sig == signal.SIGSTOP:
            os.kill(pid, signal.SIGCONT)
        else:
            res = cluster.cli("devcluster", "up")
            assert res.returncode == 0, res.stderr
        deadline = time.monotonic() + 60
        while not _answers(cluster):
            assert time.monotonic() < deadline, "slurmctld did not come back"
            time.sleep(0.5)


def _running_job(cli: Cli, *command: str) -> str:
    """A job that runs; its state is settled in slurmctld's state files before any kill."""
    job_id = str(cli.submit("--", *command)["job_id"])
    cli.wait(job_id, lambda j: j["state"] == "RUNNING")
    # slurmctld saves job state up to 5 s after a change. Killed before that, it recovers the
    # job as PENDING, requeues it held ("launch failed requeued held") and drains the node
    # that still runs it ("Duplicate jobid").
    out = cli.cluster.client().run(["squeue", "--noheader", "--jobs", job_id, "--format=%S"])
    started = time.mktime(time.strptime(out.stdout.strip(), "%Y-%m-%dT%H:%M:%S"))
    saved = cli.cluster.directory / "spool" / "ctld" / "job_state"
    deadline = time.monotonic() + 8
    while saved.stat().st_mtime < started + 1 and time.monotonic() < deadline:
        time.sleep(0.25)
    return job_id


def _timed(cli: Cli, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.monotonic()
    res = cli(*args, timeout_s=60)
    assert "Traceback" not in res.stderr, res.stderr
    return res, time.monotonic() - t0


def _rows(cli: Cli) -> list[tuple[object, ...]]:
    return sqlite3.connect(cli.db).execute("SELECT * FROM jobs ORDER BY id").fetchall()


def test_killed_controller_status_is_prompt_stale_and_stores_nothing(cli: Cli) -> None:
    job_id = _running_job(cli, "sleep", "120")
    before = _rows(cli)
    with controller_stopped(cli.cluster):
        for args in (("status",), ("status", job_id), ("status", "--json")):
            res, took = _timed(cli, *args)
            assert res.returncode == 1 and took < 4, (args, took, res.stderr)
            assert res.stderr.startswith("Error:") and "the SLURM controller is down" in res.stderr
            assert CONTROLLER in res.stderr and "hpctrain devcluster up" in res.stderr
            assert "another cluster" not in res.stderr and "cluster ?" not in res.stderr
        row = next(ln for ln in cli("status").stdout.splitlines() if ln.startswith(job_id))
        assert "RUNNING?" in row
        data = json.loads(res.stdout)
        (job,) = [j for j in data["jobs"] if j["job_id"] == job_id]
        assert job["state"] == "RUNNING" and job["stale"] and not job["terminal"]
        assert "refuses connections" in data["error"]["what"]
        assert _rows(cli) == before
    job = cli.job(job_id)
    assert job["state"] == "RUNNING" and not job["stale"]
    cli.ok("cancel", job_id)
    assert cli.wait(job_id, lambda j: j["terminal"])["state"] == "CANCELLED"


def test_killed_controller_cancel_and_submit_fail_and_the_job_runs_on(cli: Cli) -> None:
    job_id = _running_job(cli, "sleep", "120")
    before = _rows(cli)
    with controller_stopped(cli.cluster):
        for args in (("cancel", job_id), ("cancel", "--all", "--yes"),
                     ("cancel", job_id, "--json")):
            res, took = _timed(cli, *args)
            assert res.returncode == 1 and took < 4, (args, took, res.stderr)
            assert res.stderr.startswith("Error: nothing was cancelled") and job_id in res.stderr
            assert "No unfinished jobs" not in res.stderr and res.stdout == ""
        res, took = _timed(cli, "submit", "--profile", "local", "--", "true")
        assert res.returncode == 1 and took < 4 and "the SLURM controller is down" in res.stderr
        assert _rows(cli) == before
        assert len(list((cli.cwd / "hpctrain-runs").iterdir())) == 1
    assert cli.job(job_id)["state"] == "RUNNING"
    assert json.loads(cli.ok("cancel", "--all", "--yes", "--json").stdout)["cancelled"] == [job_id]
    assert cli.wait(job_id, lambda j: j["terminal"])["state"] == "CANCELLED"


def test_logs_follow_outlives_a_killed_controller(cli: Cli) -> None:
    job_id = _running_job(cli, "bash", "-c", "for i in $(seq 1 30); do echo line $i; sleep 1; "
                                             "done")
    follow = subprocess.Popen(
        [sys.executable, "-m", "hpctrain", "logs", "-f", job_id], env=cli.env, cwd=cli.cwd,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        with controller_stopped(cli.cluster):
            # Long enough for logs -f to ask SLURM (every 5-15 s) while it is down.
            time.sleep(16)
            assert follow.poll() is None, follow.communicate()
        out, err = follow.communicate(timeout=90)
    finally:
        follow.kill()
    assert follow.returncode == 0 and "Traceback" not in err, err
    assert out.splitlines()[-30:] == [f"line {i}" for i in range(1, 31)]
    assert err.count("the SLURM controller is down") == 1, err
    assert "still following the file" in err and "SLURM answers again" in err
    assert err.rstrip().endswith(f"job {job_id} COMPLETED"), err
    assert cli.job(job_id)["terminal"]


def test_stopped_controller_is_reported_within_the_timeout(cli: Cli) -> None:
    cli.env["HPCTRAIN_SLURM_TIMEOUT"] = "3"
    job_id = _running_job(cli, "sleep", "120")
    before = _rows(cli)
    with controller_stopped(cli.cluster, signal.SIGSTOP):
        res, took = _timed(cli, "status")
        assert res.returncode == 1 and 3 <= took < 6, (took, res.stderr)
        assert "did not answer within 3 s" in res.stderr and CONTROLLER in res.stderr
        assert "RUNNING?" in res.stdout
        res, took = _timed(cli, "cancel", job_id)
        assert res.returncode == 1 and took < 6 and "did not answer within 3 s" in res.stderr
        # The request sits in the stopped controller's socket queue: it may yet be carried out.
        assert f"job(s) {job_id} may still be cancelled" in res.stderr
        assert _rows(cli) == before
    if cli.job(job_id)["state"] == "RUNNING":
        cli.ok("cancel", job_id)
    assert cli.wait(job_id, lambda j: j["terminal"])["state"] == "CANCELLED"


def _interrupted(cli: Cli, *args: str, after_s: float) -> tuple[int, str, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpctrain", *args], env=cli.env, cwd=cli.cwd,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        time.sleep(after_s)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    return proc.returncode, out, err


def test_ctrl_c_is_clean_while_the_controller_is_dead(cli: Cli) -> None:
    job_id = _running_job(cli, "sleep", "120")
    with controller_stopped(cli.cluster):
        code, _out, err = _interrupted(cli, "logs", "-f", job_id, after_s=4)
        assert code == 130 and "Traceback" not in err, err
        assert "the SLURM controller is down" in err
        code, out, err = _interrupted(cli, "status", "--watch", "--interval", "1", after_s=4)
        assert code in (0, 130) and "Traceback" not in err + out, err
        assert "the SLURM controller is down" in out and "RUNNING?" in out
    cli.ok("cancel", job_id)
