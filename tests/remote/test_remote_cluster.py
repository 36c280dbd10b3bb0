"""From a laptop (its own HPCTRAIN_HOME, no SLURM of its own) through a real sshd to the dev
cluster: submit a 2-node job, status, logs -f and cancel, all over one ssh connection."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import DevClusterHandle
from tests.remote.conftest import Laptop, Sshd

TICKS = "echo tick-$SLURMD_NODENAME-$SLURM_PROCID; sleep 2; echo tock-$SLURMD_NODENAME"


def _job(lap: Laptop, job_id: str) -> dict[str, Any]:
    (job,) = json.loads(lap.ok("status", job_id, "--json").stdout)["jobs"]
    return dict(job)


def _logged_in(sshd: Sshd, laptop: Callable[..., Laptop], tmp_path: Path, name: str
               ) -> tuple[Laptop, Path, Path]:
    """A laptop whose remote workdir has a hostile name, logged in: (laptop, workdir, marker)."""
    marker = tmp_path / "pwned"
    workdir = sshd.remote_home / f"{name} 'q' $(touch {marker}); x"
    lap = laptop(str(workdir))
    lap.ok("login", "remote")
    return lap, workdir, marker


def test_submit_status_logs_cancel_over_one_connection(
    devcluster: DevClusterHandle, sshd: Sshd, laptop: Callable[..., Laptop], tmp_path: Path
) -> None:
    lap, workdir, marker = _logged_in(sshd, laptop, tmp_path, "proj")
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
    # One for SLURM, one for the run directory's overview (one job asked for by id).
    assert len(sshd.commands()) == before + 2, sshd.commands()[before:]
    assert job["cluster"] == devcluster.client().cluster_name()
    assert job["nodes"] == 2 and job["state"] in ("PENDING", "RUNNING", "COMPLETED")

    logs = lap.ok("logs", "-f", job_id, timeout_s=90)
    for node in ("node1", "node2"):
        assert f"tick-{node}-" in logs.stdout and f"tock-{node}" in logs.stdout, logs.stdout
    assert "COMPLETED" in logs.stderr, logs.stderr
    job = _job(lap, job_id)
    assert job["state"] == "COMPLETED"
    # What only the run directory on the login holds, copied over in one round trip: the
    # monitor's summary of both nodes and the batch script's start-up marks.
    assert {n["node"] for n in job["monitor"]["nodes"]} == {"node1", "node2"}, job
    assert job["startup"]["tracks"], job
    stats = json.loads(lap.ok("stats", job_id, "--json").stdout)
    assert stats["run_dir"] == f"testlogin:{done['run_dir']}", stats
    assert {n["node"] for n in stats["nodes"]} == {"node1", "node2"}
    shown = lap.ok("status", job_id).stdout
    assert "monitor (hpctrain stats for more):" in shown and "start-up" in shown, shown

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


RACE_TRAIN = "echo TRAINED job=$SLURM_JOB_ID nodes=$SLURM_JOB_NUM_NODES"


def test_first_of_race_through_the_login(
    devcluster: DevClusterHandle, sshd: Sshd, laptop: Callable[..., Laptop], tmp_path: Path
) -> None:
    lap, workdir, marker = _logged_in(sshd, laptop, tmp_path, "race")
    connections = sshd.connections()
    race = ("submit", "--profile", "remote", "--first-of", "1x1,2x1", "--time", "2",
            "--no-monitor", "--json")

    # The dry run asks the login's SLURM (the laptop has none) for each alternative's start.
    dry = json.loads(lap.ok(*race, "--dry-run", "--", "sh", "-c", RACE_TRAIN).stdout)
    assert [a["check"]["accepted"] for a in dry["alternatives"]] == [True, True], dry
    assert not workdir.exists() or not (workdir / "hpctrain-runs").exists()

    done = json.loads(lap.ok(*race, "--", "sh", "-c", RACE_TRAIN).stdout)
    ids = {a["topology"]: a["job_id"] for a in done["alternatives"]}
    run_dir = Path(str(done["run_dir"]))
    assert done["login"] == "testlogin" and str(run_dir).startswith(str(workdir) + "/")
    assert (run_dir / "alternatives.txt").read_text().split() == [
        ids["1x1"], "1x1", ids["2x1"], "2x1"]
    assert {p.name for p in run_dir.glob("job-*.sbatch")} == {"job-1x1.sbatch", "job-2x1.sbatch"}

    deadline = time.monotonic() + 120
    while True:
        jobs = json.loads(lap.ok("status", ids["2x1"], "--json").stdout)["jobs"]
        if all(j["terminal"] for j in jobs):
            break
        assert time.monotonic() < deadline, jobs
        time.sleep(2)
    winner = (run_dir / "race-claim" / "winner").read_text().split()
    assert winner[0] in ids.values() and {j["race"]["winner"] for j in jobs} == {winner[0]}
    trained = [line for f in sorted(run_dir.glob("*.out"))
               for line in f.read_text().splitlines() if line.startswith("TRAINED")]
    assert trained and {line.split()[1] for line in trained} == {f"job={winner[0]}"}
    assert sshd.connections() == connections, "the race must go over the one master"
    assert not marker.exists()
