"""`hpctrain dev` on the dev cluster, driven through a real terminal (tmux): the shell is on a
compute node inside the job, its environment is a batch rank 0's of the same request, a 2-node
DDP training runs twice from it in the same allocation, and exit or idleness ends the job."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import DevClusterHandle
from tests.dev.terminal import Terminal, wait_file
from tests.jobs.test_jobs_cluster import Cli

# Writes the environment of rank 0 (RANK as the launcher sets it) to the file it is given.
# Whole or not there: the test reads the file as soon as it exists (wait_file).
DUMP = ("import json, os, sys\n"
        "if os.environ.get('RANK', '0') == '0':\n"
        "    json.dump(dict(os.environ), open(sys.argv[1] + '.tmp', 'w'))\n"
        "    os.replace(sys.argv[1] + '.tmp', sys.argv[1])\n")
REQUEST = ("-P", "local", "-N", "2", "--gpus-per-node", "1", "--time", "5", "--no-monitor")
# What may differ between the dev shell and a batch rank 0 of the same request: what names
# the job (its id, its run directory, the port made from its id, the supervisor's attempt and
# budget: a dev job's shell has no supervisor),
# the launch step a batch rank runs in (the shell is in a step of its own, whose variables its
# start-up removes), and the shell's own (its directory history, depth, last command).
NAMING_THE_JOB = {"SLURM_JOB_ID", "SLURM_JOBID", "HPCTRAIN_RUN_DIR", "HPCTRAIN_STDOUT",
                  "HPCTRAIN_STDERR", "MASTER_PORT", "HPCTRAIN_ATTEMPT", "HPCTRAIN_RESTARTS"}
STEP = re.compile(r"SRUN_DEBUG|SLURMD_DEBUG|SLURM_(STEP|SRUN_COMM|LAUNCH_NODE|TASK_PID|"
                  r"CPU_BIND|UMASK|PRIO_PROCESS|DISTRIBUTION|GTIDS|STEPID|TOPOLOGY_ADDR|"
                  r"JOB_CPUS_PER_NODE_PACK_GROUP)")
SHELL = {"OLDPWD", "SHLVL", "_", "LINES", "COLUMNS", "PS1"}
# SLURM 24.11 gives each job its start and end time (seconds apart between two jobs).
TIME = {"SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME"}


@pytest.fixture
def cli(devcluster: DevClusterHandle, tmp_path: Path) -> Cli:
    cli = Cli(devcluster, tmp_path)
    (cli.cwd / "dump_env.py").write_text(DUMP)
    return cli


@pytest.fixture
def term(cli: Cli) -> Iterator[Terminal]:
    env = {**cli.env, "PATH": f"{Path(sys.executable).parent}:{cli.env['PATH']}"}
    terminal = Terminal("dev", env, cli.cwd)
    yield terminal
    # A shell that went without `exit` leaves its dev job for its idle time: not the suite's.
    jobs = re.findall(r"dev job (\d+) queued|\"job_id\": \"(\d+)\"", terminal.screen())
    terminal.close()
    leftover = [j for pair in jobs for j in pair if j]
    if leftover:
        cli.cluster.client().scancel(leftover)


def _differences(dev: dict[str, str], batch: dict[str, str]) -> dict[str, tuple[str, str]]:
    names = (set(dev) | set(batch)) - NAMING_THE_JOB - SHELL - TIME
    return {n: (dev.get(n, "<unset>"), batch.get(n, "<unset>")) for n in sorted(names)
            if not STEP.match(n) and dev.get(n) != batch.get(n)}


def test_dev_shell_is_a_batch_rank_0_and_runs_ddp_twice(cli: Cli, term: Terminal) -> None:
    term.type("hpctrain submit " + " ".join(REQUEST) + " --no-snapshot --json -- python3 "
              "dump_env.py batch-env.json >batch.json; echo SUBMITTED-$?")
    term.wait_for("SUBMITTED-0", 60)
    term.type("hpctrain dev " + " ".join(REQUEST) + " --max-epochs 2")
    screen = term.wait_for(":" + str(cli.cwd) + "$ ", 30)
    job = re.search(r"dev job (\d+) queued", screen)
    assert job, screen
    # The prompt names the node the shell runs on: a compute node of the job.
    assert re.search(rf"\(dev {job[1]}\) node[12]:", screen), screen
    term.type("python3 dump_env.py dev-env.json")
    dev = json.loads(wait_file(cli.cwd / "dev-env.json", 30))
    batch = json.loads(wait_file(cli.cwd / "batch-env.json", 60))
    assert dev["SLURM_JOB_ID"] == job[1] and dev["SLURMD_NODENAME"] in ("node1", "node2")
    assert dev["RANK"] == "0" and dev["WORLD_SIZE"] == "2"
    assert _differences(dev, batch) == {}
    # The ssh alias from this machine (no login): its ProxyCommand is the srun itself.
    config = cli.cwd / "alias config"
    config.write_text(cli.ok("dev", "--attach", job[1]).stdout)
    ran = subprocess.run(["ssh", "-F", str(config), f"hpctrain-dev-{job[1]}",
                          "echo $SLURMD_NODENAME"], capture_output=True, text=True, timeout=60,
                         check=False, stdin=subprocess.DEVNULL)
    assert ran.stdout.strip() == dev["SLURMD_NODENAME"], ran.stderr
    # The packaged trainer on both nodes, twice, in this allocation. Each is typed at the
    # prompt: while a run goes on, what is typed is rank 0's input (srun's), as for pdb.
    prompt = f"(dev {job[1]}) node"
    for run in (1, 2):
        term.type("hpctrain dev-run")
        term.wait_for("done: 2 epoch(s)", 90, count=run)
        term.wait_for(prompt, 10, count=2 + run)
    runs = Path(json.loads((cli.cwd / "batch.json").read_text())["run_dir"]).parent
    (dev_dir,) = [d for d in runs.iterdir() if (d / "dev-runs").is_dir()]
    assert sorted(p.name for p in (dev_dir / "dev-runs").iterdir()) == ["001", "002"]
    term.type("exit")
    term.wait_for(f"dev job {job[1]} ends with its shell", 10)
    assert cli.cluster.wait_job(job[1], timeout_s=15)["State"] == "COMPLETED"
    # Back to batch: the dev job's request, launched, with what only a batch job has.
    again = json.loads(cli.ok("submit", "--like-dev", job[1], "--dry-run", "--json").stdout)
    plan = again["plan"]
    assert (plan["nodes"], plan["gpus_per_node"], plan["monitor_interval_s"]) == (2, 1, None)
    assert "trainer.max_epochs=2" in plan["command"] and plan["restarts"] == 2, plan
    assert "python -m hpctrain.supervisor --restarts 2 --" in again["script_text"]


def test_a_dev_job_whose_shell_was_lost_ends_after_its_idle_time(cli: Cli,
                                                                 term: Terminal) -> None:
    # `kill -9`: the shell ends without its exit (a lost connection); the job waits for
    # another shell or step for the profile's idle time, then frees its nodes.
    (cli.cwd / "idle.yaml").write_text("extends: local\nname: local-idle\ndev_idle_s: 3\n")
    term.type("hpctrain dev -P idle.yaml --time 5")
    screen = term.wait_for(":" + str(cli.cwd) + "$ ", 30)
    job = re.search(r"dev job (\d+) queued", screen)
    assert job, screen
    term.type("kill -9 $$")
    term.wait_for(f"dev job {job[1]} ends with its shell", 10)
    started = time.monotonic()
    assert cli.cluster.wait_job(job[1], timeout_s=3 + 30)["State"] == "COMPLETED"
    assert time.monotonic() - started < 3 + 30
    (log,) = Path(cli.cwd).glob(f"hpctrain-runs/*/*-{job[1]}.out")
    assert "no shell and no step for 3 s" in log.read_text()


def test_a_dev_shell_is_warned_before_its_time_limit(cli: Cli, term: Terminal) -> None:
    # A 2-minute dev job: SLURM signals its script 60 s before the limit (up to ~30 s late),
    # and the script writes the warning to the shell's terminal.
    term.type("hpctrain dev -P local --time 2 --no-monitor")
    screen = term.wait_for(":" + str(cli.cwd) + "$ ", 30)
    job = re.search(r"dev job (\d+) queued", screen)
    assert job, screen
    term.wait_for(f"dev job {job[1]} reaches its time limit in about 60 s", 110)
    term.type("exit")
    term.wait_for(f"dev job {job[1]} ends with its shell", 15)
    assert cli.cluster.wait_job(job[1], timeout_s=15)["State"] == "COMPLETED"
