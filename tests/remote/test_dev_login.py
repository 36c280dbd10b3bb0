"""`hpctrain dev` from a laptop through a real sshd (the login) to the dev cluster, in a real
terminal (tmux): the shell on the node over the one master, then `dev --attach`'s ssh alias,
through which `ssh ALIAS` reaches the same job's node with no sshd of the site's there."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import DevClusterHandle
from tests.dev.terminal import Terminal
from tests.remote.conftest import Laptop, Sshd
from tests.waits import wait_for


@pytest.fixture
def logged_in(sshd: Sshd, laptop: Callable[..., Laptop], tmp_path: Path
              ) -> tuple[Laptop, Path, Path]:
    """A laptop logged in to a login whose workdir has a hostile name: (laptop, workdir,
    a file that exists only if some name was run as shell code)."""
    marker = tmp_path / "pwned"
    workdir = sshd.remote_home / f"proj 'q' $(touch {marker}); x"
    lap = laptop(str(workdir))
    lap.ok("login", "remote")
    return lap, workdir, marker


@pytest.fixture
def term(devcluster: DevClusterHandle, logged_in: tuple[Laptop, Path, Path]
         ) -> Iterator[Terminal]:
    lap = logged_in[0]
    env = {**lap.env, "PATH": f"{Path(sys.executable).parent}:{lap.env['PATH']}"}
    terminal = Terminal("devlogin", env, lap.project)
    yield terminal
    jobs = re.findall(r"dev job (\d+) queued", terminal.screen())
    terminal.close()
    if jobs:
        devcluster.client().scancel(jobs)


def test_dev_through_a_login_and_its_ssh_alias(
        devcluster: DevClusterHandle, sshd: Sshd, logged_in: tuple[Laptop, Path, Path],
        term: Terminal, tmp_path: Path) -> None:
    lap, workdir, marker = logged_in
    # A command of the project's own: the packaged trainer would ask for the profile's venv,
    # which the 24.11 root does not have.
    term.type("hpctrain dev -P remote --time 5 -- python3 train.py")
    screen = term.wait_for(f":{workdir}$ ", 60)
    job = re.search(r"dev job (\d+) queued", screen)
    assert job, screen
    # The shell is on a compute node of the job, in the synced project on the login's side.
    assert re.search(rf"\(dev {job[1]}\) node1:", screen), screen
    term.type('echo "on-$SLURMD_NODENAME-in-$SLURM_JOB_ID"')
    term.wait_for(f"on-node1-in-{job[1]}", 10)

    config = tmp_path / "laptop ssh" / "config.d" / "hpctrain"
    attach = ("dev", "--attach", job[1], "--write-ssh-config", "--ssh-config-file", str(config))
    res = lap.ok(*attach)
    alias = f"hpctrain-dev-{job[1]}"
    assert f"added Host {alias}" in res.stderr, res.stderr
    ran = subprocess.run(["ssh", "-F", str(config), alias, "hostname; echo $SLURMD_NODENAME"],
                         capture_output=True, text=True, timeout=60, check=False,
                         stdin=subprocess.DEVNULL)
    # The dev cluster's nodes share this machine's host name; SLURM names the node.
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == [subprocess.getoutput("hostname"), "node1"], ran.stdout
    # A TCP stream from the node (as `ssh -L` to a Jupyter there): the login's sshd answers.
    banner = subprocess.run(["ssh", "-F", str(config), "-W", f"127.0.0.1:{sshd.port}", alias],
                            capture_output=True, timeout=60, check=False, input=b"")
    assert banner.stdout.startswith(b"SSH-2.0-OpenSSH"), banner
    # An open connection is a step of the job, so the idle end counts it as activity.
    with subprocess.Popen(["ssh", "-F", str(config), alias, "sleep 60"],
                          stdin=subprocess.DEVNULL) as held:
        wait_for(lambda: _step_names(devcluster, job[1]), 20, "the alias's step",
                 until=lambda names: "hpctrain-dev-ssh" in names)
        held.terminate()
    # Written again: the job's block is replaced, whatever else the file holds is kept.
    config.write_text(config.read_text() + "\nHost mine\n  HostName example.org\n")
    res = lap.ok(*attach)
    assert f"replaced Host {alias}" in res.stderr and "Host mine" in config.read_text()
    assert config.read_text().count(f"Host {alias}\n") == 1
    # Every ssh above went through the one master the login opened.
    assert sshd.connections() == 1

    term.type("exit")
    term.wait_for(f"dev job {job[1]} ends with its shell", 15)
    assert devcluster.wait_job(job[1], timeout_s=15)["State"] == "COMPLETED"
    refused = lap("dev", "--attach", job[1])
    assert refused.returncode == 1 and f"dev job {job[1]} has ended" in refused.stderr
    assert not marker.exists()


def _step_names(devcluster: DevClusterHandle, job_id: str) -> list[str]:
    return subprocess.run(["squeue", "--steps", "--noheader", "--format=%j", "--jobs", job_id],
                          env=devcluster.env(), capture_output=True, text=True, timeout=30,
                          check=False).stdout.split()
