"""`login --ssh-config FILE` and `login --persist`, against a real sshd on loopback: the file is
the one ssh reads, and the master lives as long as --persist says while unused."""

from __future__ import annotations

import getpass
import json
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.options.conftest import running
from tests.remote.conftest import Laptop, Sshd

ALIASES = ("optb-login-a", "optb-login-b")


@pytest.fixture
def ssh_config(sshd: Sshd, tmp_path: Path) -> Path:
    """A config of our own (no other file names these aliases) reaching `sshd` as each alias."""
    config = tmp_path / "my ssh config"
    config.write_text("\n".join([
        "Host " + " ".join(ALIASES), "  HostName 127.0.0.1", f"  Port {sshd.port}",
        f"  User {getpass.getuser()}", f'  IdentityFile "{sshd.root}/id_user"',
        "  IdentitiesOnly yes", f'  UserKnownHostsFile "{sshd.root}/known_hosts"',
        "  GlobalKnownHostsFile /dev/null", "  StrictHostKeyChecking yes", "  LogLevel ERROR",
        ""]))
    return config


@pytest.fixture
def lap(laptop: Callable[..., Laptop], ssh_config: Path) -> Iterator[Laptop]:
    """A laptop home; the masters these tests open are closed afterwards."""
    made = laptop("work")
    yield made
    for alias in ALIASES:
        made("login", alias, "--ssh-config", str(ssh_config), "--close")


def _master_pid(socket: str) -> int:
    out = subprocess.run(["ssh", "-S", socket, "-O", "check", "x"], capture_output=True,
                         text=True, check=False, timeout=30)
    match = re.search(r"pid=(\d+)", out.stderr)
    assert match, out.stderr
    return int(match.group(1))


def _wait_gone(pid: int, timeout_s: float) -> None:
    # /proc, not `ssh -O check`: a check must not be what keeps the master busy.
    deadline = time.monotonic() + timeout_s
    while running(pid):
        if time.monotonic() > deadline:
            raise AssertionError(f"ssh master {pid} still runs {timeout_s} s after its persist")
        time.sleep(0.2)


def test_ssh_config_is_the_file_ssh_reads(sshd: Sshd, lap: Laptop, ssh_config: Path) -> None:
    # ~/.ssh/config does not know the alias: without the file, ssh cannot resolve it.
    without = lap("login", ALIASES[0], "--json", timeout_s=60)
    assert without.returncode != 0 and sshd.connections() == 0, without.stderr
    res = lap("login", ALIASES[0], "--ssh-config", str(ssh_config), "--json", timeout_s=60)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["opened"] is True and data["login"] == ALIASES[0]
    assert data["remote_user"] == getpass.getuser()
    # It reached this sshd (its log says so), and later commands reuse the master.
    assert sshd.connections() == 1
    check = lap("login", ALIASES[0], "--ssh-config", str(ssh_config), "--check", "--json")
    assert check.returncode == 0 and json.loads(check.stdout)["open"] is True, check.stderr
    assert sshd.connections() == 1


def test_persist_is_how_long_the_unused_master_stays(lap: Laptop, ssh_config: Path) -> None:
    long = lap.ok("login", ALIASES[0], "--ssh-config", str(ssh_config), "--persist", "1h",
                  "--json")
    short = lap.ok("login", ALIASES[1], "--ssh-config", str(ssh_config), "--persist=3s",
                   "--json")
    long_pid = _master_pid(json.loads(long.stdout)["socket"])
    short_pid = _master_pid(json.loads(short.stdout)["socket"])
    cmdline = Path(f"/proc/{long_pid}/cmdline").read_bytes().split(b"\0")
    assert b"ControlPersist=1h" in cmdline, cmdline
    # The 3 s master ends by itself once unused; the 1 h one, opened first, is still there.
    _wait_gone(short_pid, timeout_s=120)
    assert running(long_pid)
    gone = lap("login", ALIASES[1], "--ssh-config", str(ssh_config), "--check")
    assert gone.returncode == 1 and "hpctrain login" in gone.stderr, gone.stderr
    lap.ok("login", ALIASES[0], "--ssh-config", str(ssh_config), "--check")
