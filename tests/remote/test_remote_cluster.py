"""From a laptop (its own HPCTRAIN_HOME, no SLURM of its own) through a real sshd to the dev
cluster: submit a 2-node job, status, logs -f and cancel, all over one ssh connection."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import DevClusterHandle
from tests.remote.conftest import Laptop, Sshd

TICKS = "echo tick-$SLURMD_NODENAME-$SLURM_PROCID; sleep 2; echo tock-$SLURMD_NODENAME"


def _job(lap: Laptop, job_id: str) -> dict[str, object]:
    (job,) = json.loads(lap.ok("status", job_id, "--json").stdout)["jobs"]
    return dict(job)


def test_submit_status_logs_cancel_over_one_connection(
    devcluster: DevClusterHandle, sshd: Sshd, laptop: Callable[..., Laptop], tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    workdir = sshd.remote_home / f"proj 'q' $(touch {marker}); x"
    lap = laptop(str(workdir))
    lap.ok("login", "remote")
    connections = sshd.connections()
    assert connections == 1

    res = lap.ok("submit", "--profile", "remote", "--nodes", "2", "--gpus-per-node", "1",
                 "--time", "2", "--json", "--", "sh", "-c", TICKS)
    done = json.loads(res.stdout)
    job_id = str(done["job_id"])
    assert done["login"] == "testlogin" and str(done["run_dir"]).startswith(str(workdir) + "/")
    # The project went over whole: tracked and untracked files, not what .gitignore names.
    assert (workdir / "train.py").read_text() == "print('hello from the laptop')\n"
    assert not (workdir / "data").exists()
    assert Path(str(done["run_dir"]), "job.sbatch").is_file()

    before = len(sshd.commands())
    job = _job(lap, job_id)
    assert len(sshd.commands()) == before + 1, "one status refresh = one remote command"
    assert job["cluster"] == devcluster.client().cluster_name()
    assert job["nodes"] == 2 and job["state"] in ("PENDING", "RUNNING", "COMPLETED")

    logs = lap.ok("logs", "-f", job_id, timeout_s=90)
    for node in ("node1", "node2"):
        assert f"tick-{node}-" in logs.stdout and f"tock-{node}" in logs.stdout, logs.stdout
    assert "COMPLETED" in logs.stderr, logs.stderr
    assert _job(lap, job_id)["state"] == "COMPLETED"

    res = lap.ok("submit", "--profile", "remote", "--time", "2", "--json", "--",
                 "sleep", "300")
    long_id = str(json.loads(res.stdout)["job_id"])
    cancelled = json.loads(lap.ok("cancel", long_id, "--json").stdout)
    assert cancelled["cancelled"] == [long_id]
    devcluster.wait_job(long_id, timeout_s=30)
    assert _job(lap, long_id)["state"] == "CANCELLED"

    # Refused by SLURM there: nothing is left behind in the remote run directories.
    runs = sorted((workdir / "hpctrain-runs").iterdir())
    res = lap("submit", "--profile", "remote", "--sbatch-arg=--begin=notatime", "--", "true")
    assert res.returncode == 1 and "Error: SLURM refused the job" in res.stderr, res.stderr
    assert sorted((workdir / "hpctrain-runs").iterdir()) == runs

    for _ in range(10):
        lap.ok("status", "--json")
    assert sshd.connections() == connections, "every command must reuse the one master"
    assert not marker.exists()
