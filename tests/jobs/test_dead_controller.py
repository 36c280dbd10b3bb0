"""A dead (SIGKILL) or stopped (SIGSTOP) slurmctld on the real dev cluster: every command
names it promptly, nothing is recorded as finished, and all is well once it is back.

Each test restores the controller in a `finally` (`hpctrain devcluster up` repairs the
cluster; SIGCONT for a stopped one). Run under the shared lock:
`flock /work/notes/devcluster.lock .venv/bin/pytest -q tests/jobs/test_dead_controller.py`.
"""

from __future__ import annotations

import json
import os
import pty
import select
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

from hpctrain.devcluster.cluster import ports_from_environment
from hpctrain.slurm.transport import PROBE_AFTER_S
from tests.waits import assert_prompt, timed, wait_for

from .test_jobs_cluster import Cli

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = pytest.mark.cluster
CONTROLLER = f"127.0.0.1:{ports_from_environment().slurmctld}"


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
        wait_for(lambda: _answers(cluster), 60, "answer from the restored slurmctld")


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
    wait_for(lambda: saved.stat().st_mtime >= started + 1, 60,
             f"save of job {job_id}'s state by slurmctld ({saved} written after its start)")
    return job_id


def _timed(cli: Cli, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    res, took = timed(cli, *args, timeout_s=60)
    assert "Traceback" not in res.stderr, res.stderr
    return res, took


def _baseline(cli: Cli) -> float:
    """The slowest of comparable calls under this machine's present load: `status` reaching a
    live slurmctld, and a submit's preparation (--dry-run)."""
    return max(timed(cli.ok, *args)[1] for args in (
        ("status",), ("status",), ("submit", "--profile", "local", "--dry-run", "--", "true")))


def _assert_prompt(took: float, baseline: float, args: tuple[str, ...]) -> None:
    # A refused connection is found by the port probe the client makes after PROBE_AFTER_S;
    # without it, squeue retries for MessageTimeout (10 s) and more.
    assert_prompt(took, baseline, " ".join(args), plus_s=PROBE_AFTER_S)


def _rows(cli: Cli) -> list[tuple[object, ...]]:
    return sqlite3.connect(cli.db).execute("SELECT * FROM jobs ORDER BY id").fetchall()


def test_killed_controller_status_is_prompt_stale_and_stores_nothing(cli: Cli) -> None:
    job_id = _running_job(cli, "sleep", "120")
    baseline = _baseline(cli)  # first: `status` refreshes the rows
    before = _rows(cli)
    with controller_stopped(cli.cluster):
        for args in (("status",), ("status", job_id), ("status", "--json")):
            res, took = _timed(cli, *args)
            assert res.returncode == 1, (args, res.stderr)
            _assert_prompt(took, baseline, args)
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
    baseline = _baseline(cli)  # first: `status` refreshes the rows
    before = _rows(cli)
    with controller_stopped(cli.cluster):
        for args in (("cancel", job_id), ("cancel", "--all", "--yes"),
                     ("cancel", job_id, "--json")):
            res, took = _timed(cli, *args)
            assert res.returncode == 1, (args, res.stderr)
            _assert_prompt(took, baseline, args)
            assert res.stderr.startswith("Error: nothing was cancelled") and job_id in res.stderr
            assert "No unfinished jobs" not in res.stderr
            # --json: the failure as the one error object; otherwise nothing on stdout.
            said = json.loads(res.stdout)["error"]["what"] if "--json" in args else res.stdout
            assert said == "" or said.startswith("nothing was cancelled")
        args = ("submit", "--profile", "local", "--", "true")
        res, took = _timed(cli, *args)
        assert res.returncode == 1 and "the SLURM controller is down" in res.stderr
        _assert_prompt(took, baseline, args)
        assert _rows(cli) == before
        # No run directory from the refused submit (the snapshot store is a cache).
        assert len([p for p in (cli.cwd / "hpctrain-runs").iterdir()
                    if p.name not in (".snapshots", ".gitignore")]) == 1
    assert cli.job(job_id)["state"] == "RUNNING"
    assert json.loads(cli.ok("cancel", "--all", "--yes", "--json").stdout)["cancelled"] == [job_id]
    assert cli.wait(job_id, lambda j: j["terminal"])["state"] == "CANCELLED"


def test_logs_follow_outlives_a_killed_controller(cli: Cli) -> None:
    job_id = _running_job(cli, "bash", "-c", "for i in $(seq 1 30); do echo line $i; sleep 1; "
                                             "done")
    follow, out_file, err_file = _started(cli, "logs", "-f", job_id)
    try:
        with controller_stopped(cli.cluster):
            # logs -f asks SLURM every 5-15 s: it must meet the dead controller and go on.
            _wait_for_text(follow, err_file, "the SLURM controller is down")
            assert follow.poll() is None, err_file.read_text()
        follow.wait(timeout=90)
    finally:
        follow.kill()
    out, err = out_file.read_text(), err_file.read_text()
    assert follow.returncode == 0 and "Traceback" not in err, err
    assert out.splitlines()[-30:] == [f"line {i}" for i in range(1, 31)]
    assert err.count("the SLURM controller is down") == 1, err
    assert "still following the file" in err and "SLURM answers again" in err
    assert err.rstrip().endswith(f"job {job_id} COMPLETED"), err
    assert cli.job(job_id)["terminal"]


def test_stopped_controller_is_reported_within_the_timeout(cli: Cli) -> None:
    timeout_s = 3
    cli.env["HPCTRAIN_SLURM_TIMEOUT"] = str(timeout_s)
    job_id = _running_job(cli, "sleep", "120")
    baseline = _baseline(cli)  # first: `status` refreshes the rows
    before = _rows(cli)
    with controller_stopped(cli.cluster, signal.SIGSTOP):
        res, took = _timed(cli, "status")
        # It waited for the timeout (a stopped controller accepts connections), then no longer.
        assert res.returncode == 1 and took >= timeout_s, (took, res.stderr)
        assert_prompt(took, baseline, "status", plus_s=timeout_s)
        assert "did not answer within 3 s" in res.stderr and CONTROLLER in res.stderr
        assert "RUNNING?" in res.stdout
        res, took = _timed(cli, "cancel", job_id)
        assert res.returncode == 1 and "did not answer within 3 s" in res.stderr
        assert_prompt(took, baseline, "cancel", plus_s=timeout_s)
        # The request sits in the stopped controller's socket queue: it may yet be carried out.
        assert f"job(s) {job_id} may still be cancelled" in res.stderr
        assert _rows(cli) == before
    if cli.job(job_id)["state"] == "RUNNING":
        cli.ok("cancel", job_id)
    assert cli.wait(job_id, lambda j: j["terminal"])["state"] == "CANCELLED"


def _at_a_terminal() -> None:
    """Ctrl-C's default in the child, as at a terminal: a suite started in the background
    (`cmd &` without job control) hands its children SIGINT ignored, and Python then leaves
    it ignored; every loaded run failed this way before."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _started(cli: Cli, *args: str) -> tuple[subprocess.Popen[str], Path, Path]:
    """`hpctrain ARGS` running, its stdout and stderr in files the test reads while it runs."""
    out_file, err_file = (cli.cwd.parent / f"{args[0]}.{name}" for name in ("out", "err"))
    # Unbuffered: the test waits for lines while the process runs. The fault handler makes a
    # process that ignores Ctrl-C show where it is stuck when the test aborts it (_interrupted).
    env = {**cli.env, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"}
    with out_file.open("w") as out, err_file.open("w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hpctrain", *args], env=env, cwd=cli.cwd, stdout=out,
            stderr=err, text=True, stdin=subprocess.DEVNULL, preexec_fn=_at_a_terminal)
    return proc, out_file, err_file


def _wait_for_text(proc: subprocess.Popen[str], path: Path, *texts: str) -> None:
    """Wait until each of `texts` is in the file `proc` writes; fail loudly if it ends first."""
    def seen() -> bool:
        written = path.read_text()
        found = all(text in written for text in texts)
        assert found or proc.poll() is None, f"exited {proc.returncode} first: {written}"
        return found

    wait_for(seen, 90, f"{texts} in {path.name}")


def _interrupted(cli: Cli, *args: str, when: str) -> tuple[int, str, str]:
    """Ctrl-C for `hpctrain ARGS` once it has written `when` to stderr."""
    proc, out_file, err_file = _started(cli, *args)
    try:
        _wait_for_text(proc, err_file, when)
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # the fault handler writes every thread's stack
            proc.wait(timeout=30)
            raise AssertionError(f"`hpctrain {' '.join(args)}` still ran 30 s after Ctrl-C; "
                                 f"its stderr:\n{err_file.read_text()}") from None
    finally:
        proc.kill()
    return proc.returncode, out_file.read_text(), err_file.read_text()


def _watch_interrupted(cli: Cli, *when: str) -> tuple[int, str]:
    """Ctrl-C for `hpctrain status --watch` once its table shows `when`; (exit code, output).

    On a terminal: rich's live table shows on a file only when it ends."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hpctrain", "status", "--watch", "--interval", "1"],
        env={**cli.env, "NO_COLOR": "1"}, cwd=cli.cwd, stdin=subprocess.DEVNULL, stdout=slave,
        stderr=slave, preexec_fn=_at_a_terminal)
    os.close(slave)
    shown: list[bytes] = []

    def output() -> str:
        while select.select([master], [], [], 0)[0]:
            try:
                shown.append(os.read(master, 65536))
            except OSError:  # EIO: the process has ended and closed the terminal
                break
        return b"".join(shown).decode(errors="replace")

    try:
        wait_for(output, 90, f"{when} in the watched table",
                 until=lambda text: all(w in text for w in when) or proc.poll() is not None)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        return proc.returncode, output()
    finally:
        proc.kill()
        os.close(master)


def test_ctrl_c_is_clean_while_the_controller_is_dead(cli: Cli) -> None:
    job_id = _running_job(cli, "sleep", "120")
    with controller_stopped(cli.cluster):
        code, _out, err = _interrupted(cli, "logs", "-f", job_id,
                                       when="the SLURM controller is down")
        assert code == 130 and "Traceback" not in err, err
        code, out = _watch_interrupted(cli, "the SLURM controller is down", "RUNNING?")
        assert code in (0, 130) and "Traceback" not in out, out
        assert "the SLURM controller is down" in out and "RUNNING?" in out
    cli.ok("cancel", job_id)
