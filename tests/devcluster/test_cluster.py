"""The dev cluster for real: status, idempotent up, a 2-node job, recovery, down."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hpctrain.devcluster.processes import cmdline, is_running
from tests.waits import assert_prompt, timed

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = pytest.mark.cluster
OUR_PROGRAMS = {"munged", "mysqld", "mariadbd", "slurmdbd", "slurmctld", "slurmd", "slurmstepd"}


def _our_processes(directory: Path) -> list[tuple[int, str]]:
    """Live daemons whose command line or environment points into the cluster's directory."""
    found = []
    mark = str(directory)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        argv = cmdline(pid)
        if not argv or not is_running(pid):
            continue
        prog = os.path.basename(argv[0]).split(":")[0]
        if prog not in OUR_PROGRAMS:
            continue
        try:
            env = (entry / "environ").read_bytes().decode(errors="replace")
        except OSError:
            env = ""
        if mark in " ".join(argv) or mark in env:
            found.append((pid, " ".join(argv)))
    return found


@contextmanager
def _brought_back(dc: DevClusterHandle) -> Iterator[None]:
    """The block may take the shared cluster down: whatever happens in it, the cluster runs
    again afterwards as the session expects it (profile local, 2 nodes)."""
    try:
        yield
    finally:
        run = dc.directory / "run"
        # A failed block may leave pid files naming this test's processes: never daemons.
        for pid_file in run.glob("*.pid"):
            if pid_file.read_text().strip() in (str(os.getpid()), str(os.getppid())):
                pid_file.unlink()
        res = dc.cli("devcluster", "up", "--profile", "local", "--nodes", "2", "--replace",
                     timeout_s=300)
        assert res.returncode == 0, f"the dev cluster did not come back:\n{res.stderr}"


def _status(dc: DevClusterHandle) -> dict[str, Any]:
    res = dc.cli("devcluster", "status", "--json")
    return json.loads(res.stdout)


def test_status_reports_the_running_cluster(devcluster: DevClusterHandle) -> None:
    res = devcluster.cli("devcluster", "status", "--json")
    assert res.returncode == 0, res.stderr
    st = json.loads(res.stdout)
    assert st["running"] and st["healthy"]
    assert st["profile"] == "local"
    names = {d["name"]: d for d in st["daemons"]}
    assert set(names) == {"munged", "mysqld", "slurmdbd", "slurmctld", "slurmd:node1",
                          "slurmd:node2"}
    assert all(d["alive"] and is_running(d["pid"]) for d in names.values())
    assert "debug*" in st["sinfo"] and "idle" in st["sinfo"]
    state = json.loads((devcluster.directory / "state.json").read_text())
    assert state["profile"] == "local" and state["phase"] == "running"
    assert state["cluster_name"] == "hpctrain-dev"
    assert state["ports"]["slurmctld"] == 16817


def test_up_again_is_a_no_op(devcluster: DevClusterHandle) -> None:
    before, baseline = timed(_status, devcluster)
    res, took = timed(devcluster.cli, "devcluster", "up")
    assert res.returncode == 0, res.stderr
    # A no-op: no longer than `status`'s own health checks, give or take the load.
    assert_prompt(took, baseline, "devcluster up (already running)")
    assert "already running" in res.stdout
    assert f"export SLURM_CONF={devcluster.slurm_conf}" in res.stdout
    after = _status(devcluster)
    assert [d["pid"] for d in after["daemons"]] == [d["pid"] for d in before["daemons"]]


def test_up_with_another_profile_needs_down_or_replace(devcluster: DevClusterHandle) -> None:
    before = _status(devcluster)
    res = devcluster.cli("devcluster", "up", "--profile", "raven")
    assert res.returncode == 1
    assert "running profile local" in res.stderr
    assert "hpctrain devcluster down" in res.stderr and "--replace" in res.stderr
    assert _status(devcluster)["daemons"] == before["daemons"]


def test_two_node_job_runs_and_is_accounted(devcluster: DevClusterHandle, tmp_path: Path
                                            ) -> None:
    script = tmp_path / "two nodes.sh"
    script.write_text(
        "#!/bin/bash\n"
        "#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=2\n#SBATCH --gres=gpu:emu:1\n"
        "#SBATCH --time=00:05:00\n#SBATCH --output=job-%j.out\n"
        'echo "cluster=$SLURM_CLUSTER_NAME"\n'
        # The first node must resolve: it becomes MASTER_ADDR for multi-node training.
        'first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1)\n'
        'echo "first=$(getent hosts "$first")"\n'
        "srun bash -c 'echo rank=$SLURM_PROCID node=$SLURMD_NODENAME'\n"
    )
    job = devcluster.sbatch(script)
    row = devcluster.wait_job(job)
    assert row["State"] == "COMPLETED", row
    assert row["NNodes"] == "2"
    assert "gres/gpu=2" in row["AllocTRES"]
    out = (tmp_path / f"job-{job}.out").read_text()
    ranks = sorted(line for line in out.splitlines() if line.startswith("rank="))
    assert ranks == ["rank=0 node=node1", "rank=1 node=node1", "rank=2 node=node2",
                     "rank=3 node=node2"], out
    assert "cluster=hpctrain-dev" in out
    assert "first=127.0.0.1" in out


def test_local_refuses_like_a_real_cluster(devcluster: DevClusterHandle, tmp_path: Path) -> None:
    script = tmp_path / "t.sh"
    script.write_text("#!/bin/bash\nsrun hostname\n")
    ok, msg = devcluster.test_only(script, "--gres=gpu:emu:2", "--nodes=2", "--time=1:00:00")
    assert ok, msg
    assert devcluster.test_only(script, "-A", "hpctrain-test")[0]
    for bad, why in [
        (["--gres=gpu:emu:3"], "configuration is not available"),
        (["--time=3:00:00"], "time limit"),
        (["--mem=5000"], "configuration is not available"),
        (["--nodes=3"], "Node count"),
        (["--account=nosuch"], "Invalid account"),
        (["--qos=nosuch"], "Invalid qos"),
        (["--partition=nosuch"], "Invalid partition"),
    ]:
        ok, msg = devcluster.test_only(script, *bad)
        assert not ok and why in msg, (bad, msg)


def test_up_resumes_a_drained_node(devcluster: DevClusterHandle) -> None:
    client = devcluster.client()
    client.run(["scontrol", "update", "NodeName=node2", "State=DRAIN", "Reason=hpctrain-test"])
    try:
        assert "drain" in client.run(["sinfo", "-h", "-n", "node2", "-o", "%t"]).stdout
        res = devcluster.cli("devcluster", "up")
        assert res.returncode == 0 and "already running" in res.stdout, res.stderr
        # Back in service: idle, or "plnd" (idle, held by backfill for a pending job).
        state = client.run(["sinfo", "-h", "-n", "node2", "-o", "%t"]).stdout.strip()
        assert state in ("idle", "plnd"), state
    finally:
        # SLURM's own undo, not the code under test: later tests need node2 (an idle node
        # refuses RESUME, hence check=False).
        client.run(["scontrol", "update", "NodeName=node2", "State=RESUME"], check=False)


def test_up_recovers_a_dead_daemon(devcluster: DevClusterHandle) -> None:
    with _brought_back(devcluster):
        st = _status(devcluster)
        victim = next(d for d in st["daemons"] if d["name"] == "slurmd:node2")
        os.kill(victim["pid"], signal.SIGKILL)
        degraded = devcluster.cli("devcluster", "status", "--json")
        assert degraded.returncode == 1
        assert not json.loads(degraded.stdout)["healthy"]
        # capture_output: if a daemon kept our pipes open, this call would hang until timeout.
        res = devcluster.cli("devcluster", "up", timeout_s=180)
        assert res.returncode == 0, res.stderr
        after = _status(devcluster)
        assert after["healthy"]
        # Only the dead slurmd restarts; everything else, slurmctld included, is reused.
        pids = {d["name"]: d["pid"] for d in after["daemons"]}
        old = {d["name"]: d["pid"] for d in st["daemons"]}
        assert all(pids[n] == old[n] for n in ("munged", "mysqld", "slurmdbd"))
        assert pids["slurmd:node2"] != victim["pid"]
        assert all(pids[n] == old[n] for n in ("slurmctld", "slurmd:node1"))


def test_down_stops_only_ours_and_up_survives_stale_pid_files(
    devcluster: DevClusterHandle,
) -> None:
    with _brought_back(devcluster):
        _down_stops_only_ours_and_up_survives_stale_pid_files(devcluster)


def _down_stops_only_ours_and_up_survives_stale_pid_files(devcluster: DevClusterHandle) -> None:
    run = devcluster.directory / "run"
    assert _our_processes(devcluster.directory)
    res = devcluster.cli("devcluster", "down")
    assert res.returncode == 0, res.stderr
    assert _our_processes(devcluster.directory) == []
    st = _status(devcluster)
    assert not st["running"] and not any(d["alive"] for d in st["daemons"])

    # Stale pid files: a live process that is not ours (this test), a dead pid, garbage.
    (run / "slurmctld.pid").write_text(f"{os.getpid()}\n")
    (run / "mysqld.pid").write_text("4194000\n")
    (run / "slurmd-node1.pid").write_text("not a pid\n")
    res = devcluster.cli("devcluster", "down")
    assert res.returncode == 0 and "Nothing" in res.stdout, res.stdout + res.stderr
    assert is_running(os.getpid())

    (run / "slurmctld.pid").write_text(f"{os.getppid()}\n")
    (run / "slurmdbd.pid").write_text(f"{os.getpid()}\n")
    # A foreign process in a pid file is neither waited for nor killed: up succeeds.
    res = devcluster.cli("devcluster", "up", timeout_s=300)
    assert res.returncode == 0, res.stderr
    assert is_running(os.getppid())
    st = _status(devcluster)
    assert st["healthy"], st
    assert os.getpid() not in [d["pid"] for d in st["daemons"]]


def test_hpctrain_finds_the_running_cluster_without_slurm_conf(
    devcluster: DevClusterHandle,
) -> None:
    env = {k: v for k, v in devcluster.env().items() if k != "SLURM_CONF"}
    code = "from hpctrain.slurm.runner import resolve_slurm_conf; print(resolve_slurm_conf())"

    def resolved() -> str:
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=60, check=False)
        assert res.returncode == 0, res.stderr
        return res.stdout.strip()

    assert resolved() == str(devcluster.slurm_conf)
    with _brought_back(devcluster):
        assert devcluster.cli("devcluster", "down").returncode == 0
        assert resolved() == "None"
        res = devcluster.cli("devcluster", "up", timeout_s=300)
        assert res.returncode == 0, res.stderr
        assert resolved() == str(devcluster.slurm_conf)
