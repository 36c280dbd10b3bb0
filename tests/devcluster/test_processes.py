"""Daemon management without SLURM: detaching, identifying by /proc, stopping only ours."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from hpctrain.devcluster.processes import (
    Daemon,
    is_ours,
    is_running,
    read_pid,
    running_pid,
    start,
    stop,
    wait_started,
)
from hpctrain.errors import DevClusterError
from tests.waits import wait_for


def _sleeper(tmp_path: Path, marker: str) -> Daemon:
    pid_file = tmp_path / "run dir" / "sleeper.pid"
    pid_file.parent.mkdir(exist_ok=True)
    # sh writes its pid, then becomes `sleep` (same pid), like a daemon writing its pid file.
    return Daemon(
        name="sleeper",
        argv=("sh", "-c", f"echo $$ > '{pid_file}'; exec sleep 300"),
        pid_file=pid_file,
        log_file=tmp_path / "log" / "sleeper.log",
        programs=("sleep",),
        marker=f"HPCTRAIN_TEST_MARKER={marker}",
        env={"HPCTRAIN_TEST_MARKER": marker},
        self_daemonizes=False,
    )


def test_start_detaches_and_stop_kills_only_ours(tmp_path: Path) -> None:
    d = _sleeper(tmp_path, uuid.uuid4().hex)
    start(d)
    pid = wait_started(d, 10, lambda: True)
    try:
        assert running_pid(d) == pid and is_ours(pid, d)
        # Its own session, stdio on the log file: the caller's pipes are not held open.
        assert os.getsid(pid) != os.getsid(0)
        assert os.readlink(f"/proc/{pid}/fd/1") == str(d.log_file) + ".launch"
        other = _sleeper(tmp_path, "another-cluster")
        assert not is_ours(pid, other)
    finally:
        stopped = stop([d])
    assert stopped == [("sleeper", pid)]
    assert not is_running(pid)
    assert not d.pid_file.exists()


def test_stale_pid_files_are_not_killed(tmp_path: Path) -> None:
    d = _sleeper(tmp_path, uuid.uuid4().hex)
    for content in (f"{os.getpid()}\n", "4194000\n", "garbage\n", ""):
        d.pid_file.write_text(content)
        assert running_pid(d) is None
        assert stop([d]) == []
        assert not d.pid_file.exists()
    assert is_running(os.getpid())
    assert read_pid(tmp_path / "missing.pid") is None


def test_a_daemon_that_dies_at_once_is_reported(tmp_path: Path) -> None:
    d = _sleeper(tmp_path, uuid.uuid4().hex)
    dying = Daemon(
        name="dying", argv=("sh", "-c", f"echo $$ > '{d.pid_file}'; echo boom >&2; exit 3"),
        pid_file=d.pid_file, log_file=d.log_file, programs=("sh",), marker="x",
        self_daemonizes=False,
    )
    start(dying)
    with pytest.raises(DevClusterError, match="dying"):
        wait_started(dying, 5, lambda: True)


def test_failed_launcher_shows_its_output(tmp_path: Path) -> None:
    d = Daemon(name="bad", argv=("sh", "-c", "echo no config >&2; exit 2"),
               pid_file=tmp_path / "bad.pid", log_file=tmp_path / "bad.log",
               programs=("sh",), marker="x")
    with pytest.raises(DevClusterError, match="no config"):
        start(d)


def test_zombies_count_as_dead() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    # Not reaped yet: the kernel keeps a zombie that still answers kill(pid, 0).
    stat = Path(f"/proc/{proc.pid}/stat")
    wait_for(lambda: stat.read_text().rsplit(")", 1)[1].split()[0], 60, "zombie",
             until="Z".__eq__, poll_s=0.05)
    os.kill(proc.pid, 0)
    assert not is_running(proc.pid)
    proc.wait()


def test_missing_programs_name_the_packages(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path), "HPCTRAIN_HOME": str(tmp_path / "home")}
    res = subprocess.run([sys.executable, "-m", "hpctrain", "devcluster", "up"], env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 1
    err = " ".join(res.stderr.split())
    assert "slurmctld" in err and "mysqld" in err and "munged" in err
    assert "apt-get install -y slurm-wlm slurmdbd munge mariadb-server" in err
    assert not (tmp_path / "home" / "state" / "devcluster" / "run").exists()
