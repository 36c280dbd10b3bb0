"""Each option of `hpctrain submit` seen in a real job on the dev cluster (profile local)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, DevClusterHandle

from .helpers import User, sacct

PROBE = ('echo "greeting=$OPT_GREETING"; echo "venv=$VIRTUAL_ENV"; '
         'echo "python=$(command -v python)"; echo "cpus=$SLURM_CPUS_PER_TASK"')


@pytest.fixture
def user(devcluster: DevClusterHandle, tmp_path: Path) -> User:
    return User(devcluster, tmp_path)


def _lines(path: str) -> dict[str, str]:
    return dict(ln.split("=", 1) for ln in Path(path).read_text().splitlines() if "=" in ln)


def test_resources_env_and_python_env_reach_the_job(
    user: User, devcluster: DevClusterHandle, tmp_path: Path
) -> None:
    venv = tmp_path / "job env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    done = user.json("submit", "--profile", "local", "--partition", "debug", "-A",
                     "hpctrain-test", "--qos", "normal", "--cpus-per-task", "1", "--mem", "500",
                     "--time", "2", "--job-name", "optres", "-e", "OPT_GREETING=hello there",
                     "--python-env", str(venv), "--no-monitor", "--json", "--",
                     "bash", "-c", PROBE)
    job_id = str(done["job_id"])
    assert devcluster.wait_job(job_id)["State"] == "COMPLETED"
    seen = _lines(done["stdout"])
    assert seen["greeting"] == "hello there"
    assert seen["venv"] == str(venv) and seen["python"] == str(venv / "bin" / "python")
    assert seen["cpus"] == "1"
    row = sacct(devcluster, job_id, "Account,QOS,Partition,ReqCPUS,ReqMem,JobName,Timelimit")
    assert row == {"Account": "hpctrain-test", "QOS": "normal", "Partition": "debug",
                   "ReqCPUS": "1", "ReqMem": "500M", "JobName": "optres",
                   "Timelimit": "00:02:00"}


def test_constraint_reaches_the_script_and_slurm_judges_it(user: User) -> None:
    """The dev cluster's nodes have no features: a constraint a profile lists is sent as is."""
    profiles = user.cwd / "my.yaml"
    local = yaml.safe_load((REPO / "cluster_profiles" / "local.yaml").read_text())
    local["partitions"][0]["constraints"] = [{"name": "fast", "description": "none has it"}]
    profiles.write_text(yaml.safe_dump({**local, "name": "withfeature"}))
    dry = user.json("submit", "--profile", str(profiles), "--constraint", "fast", "--time", "2",
                    "--dry-run", "--json", "--", "true")
    script = str(dry["script_text"])
    assert "#SBATCH --constraint=fast" in script.splitlines()
    res = user("submit", "--profile", str(profiles), "-C", "fast", "--time", "2", "--", "true")
    assert res.returncode == 1 and "Error: SLURM refused the job" in res.stderr, res.stderr
    assert "feature" in res.stderr.lower(), res.stderr


def test_launcher_torchrun_spawns_the_workers_on_each_node(
    user: User, devcluster: DevClusterHandle
) -> None:
    (user.cwd / "probe.py").write_text(
        # One write per worker: the ranks share the output file.
        "import os\nos.write(1, ('worker %s %s %s\\n' % (os.environ['SLURMD_NODENAME'], "
        "os.environ['LOCAL_RANK'], os.environ['WORLD_SIZE'])).encode())\n")
    done = user.json("submit", "--profile", "local", "--nodes", "2", "--gpus-per-node", "2",
                     "--launcher", "torchrun", "--time", "2", "--no-monitor", "--json", "--",
                     "python", "probe.py")
    assert devcluster.wait_job(str(done["job_id"]), timeout_s=180)["State"] == "COMPLETED"
    workers = sorted(ln.split()[1:] for ln in Path(done["stdout"]).read_text().splitlines()
                     if ln.startswith("worker "))
    assert workers == [["node1", "0", "4"], ["node1", "1", "4"],
                       ["node2", "0", "4"], ["node2", "1", "4"]]


def test_monitor_interval_is_the_samplers(user: User, devcluster: DevClusterHandle) -> None:
    done = user.json("submit", "--profile", "local", "--monitor", "--monitor-interval", "3",
                     "--time", "2", "--json", "--", "sleep", "4")
    assert devcluster.wait_job(str(done["job_id"]))["State"] == "COMPLETED"
    rows = Path(done["run_dir"], "monitor", "node1.jsonl").read_text().splitlines()
    start = json.loads(rows[0])
    assert start["kind"] == "start" and start["interval_s"] == 3


def test_grace_and_requeue_reach_slurm(user: User, devcluster: DevClusterHandle) -> None:
    """Held jobs: SLURM's own record of the requeue flag; nothing runs."""
    base = ("--profile", "local", "--time", "5", "--sbatch-arg=--hold", "--json")
    on = user.json("submit", *base, "--grace", "40", "--requeue")
    off = user.json("submit", *base, "--grace", "40", "--no-requeue")
    try:
        for done, flag in ((on, "Requeue=1"), (off, "Requeue=0")):
            shown = devcluster.client().run(["scontrol", "show", "job", str(done["job_id"])])
            assert flag in shown.stdout.split(), shown.stdout
            assert "#SBATCH --signal=B:USR1@40" in Path(done["script"]).read_text()
    finally:
        user.ok("cancel", str(on["job_id"]), str(off["job_id"]))


def test_chain_runs_its_segments_one_after_another(
    user: User, devcluster: DevClusterHandle
) -> None:
    done = user.json("submit", "--profile", "local", "--chain", "2", "--time", "2",
                     "--no-monitor", "--json", "--", "true")
    first, second = (str(j) for j in done["chain"])
    assert devcluster.wait_job(second)["State"] == "COMPLETED"
    a = sacct(devcluster, first, "State,End")
    b = sacct(devcluster, second, "State,Start")
    assert a["State"] == "COMPLETED" and b["Start"] >= a["End"]  # ISO times sort as text
    shown = user.ok("status").stdout
    assert "[2/2]" in shown, shown


def test_after_waits_for_success(user: User, devcluster: DevClusterHandle) -> None:
    failing = str(user.json("submit", "--profile", "local", "--time", "2", "--no-monitor",
                            "--json", "--", "false")["job_id"])
    waiting = str(user.json("submit", "--profile", "local", "--after", failing, "--time", "2",
                            "--no-monitor", "--json", "--", "true")["job_id"])
    try:
        assert devcluster.wait_job(failing)["State"] == "FAILED"
        job = user.wait(waiting, lambda j: j["reason"] == "DependencyNeverSatisfied")
        assert job["state"] == "PENDING"
    finally:
        user.ok("cancel", waiting)
