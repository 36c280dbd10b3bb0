"""`hpctrain why` on the dev cluster: each cause a CPU SLURM can produce, provoked for real,
diagnosed with its evidence and fix (docs/why.md)."""

from __future__ import annotations

import json
import os
import pwd
import signal
from pathlib import Path
from typing import Any

import pytest

from hpctrain.devcluster.nodes import READY_STATES
from tests.conftest import DevClusterHandle
from tests.diagnosis.programs import write_project
from tests.jobs.test_jobs_cluster import Cli
from tests.waits import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

@pytest.fixture
def cli(devcluster: DevClusterHandle, tmp_path: Path) -> Cli:
    cli = Cli(devcluster, tmp_path)
    write_project(cli.cwd)
    return cli


def _ended(cli: Cli, *args: str) -> dict[str, Any]:
    job = cli.submit(*args)
    cli.wait(job["job_id"], lambda j: j["terminal"], 240)
    return job


def _why(cli: Cli, job_id: object) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(cli.ok("why", str(job_id), "--json").stdout)
    return found


def _slurm_calls(cli: Cli, job_id: object) -> list[str]:
    """The SLURM commands `hpctrain why` runs, as --debug shows each one."""
    err = cli.ok("--debug", "why", str(job_id), "--json").stderr
    return [line.split(": ", 2)[2].split()[0] for line in err.splitlines()
            if line.startswith("debug: hpctrain.slurm: ")
            and line.split(": ", 2)[2].split()[0] in SLURM_PROGRAMS]


SLURM_PROGRAMS = {"sacct", "squeue", "scontrol", "sinfo", "sbatch", "scancel", "sacctmgr"}


def test_an_exception_names_its_type_message_and_the_users_frame(cli: Cli) -> None:
    job = _ended(cli, "--nodes", "2", "--", "python", "-m", "pkg.exc")
    got = _why(cli, job["job_id"])
    assert got["cause"] == "exception" and got["certain"]
    assert "ZeroDivisionError: division by zero" in got["summary"]
    # The frame is the snapshot's copy of the user's file, line 2, in ratio().
    assert "/code/pkg/exc.py:2 (ratio)" in got["summary"]
    assert any("srun: error: node" in e for e in got["evidence"])
    text = cli.ok("why", str(job["job_id"])).stdout
    assert text.startswith(f"Job {job['job_id']} (FAILED)") and "fix:" in text
    assert _slurm_calls(cli, job["job_id"]) == ["sacct"]  # an ended job: one call
    # status says it in a few words, made once and kept.
    row = json.loads(cli.ok("status", "--json", str(job["job_id"])).stdout)["jobs"][0]
    assert row["verdict"] == "ZeroDivisionError: division by zero"
    assert "ZeroDivisionError: division by zero" in cli.ok("status", str(job["job_id"])).stdout


def test_an_import_error_names_the_module_and_the_jobs_python(cli: Cli) -> None:
    got = _why(cli, _ended(cli, "--", "python", "-m", "pkg.imp")["job_id"])
    assert got["cause"] == "import_error"
    assert "`nosuchmodule_for_why`" in got["summary"] and "/bin/python" in got["summary"]
    assert "--python-env" in got["fix"]


def test_a_missing_file_says_where_relative_paths_are_read(cli: Cli) -> None:
    got = _why(cli, _ended(cli, "--", "python", "-m", "pkg.miss")["job_id"])
    assert got["cause"] == "missing_file" and "`data/train.csv`" in got["summary"]
    assert "--in-place" in got["fix"]


@pytest.mark.parametrize(("command", "cause", "words"), [
    ("kill -SEGV $$", "signal", "SIGSEGV (segmentation fault)"),
    ("exit 3", "exit_code", "exited with code 3"),
])
def test_a_signal_and_an_exit_code(cli: Cli, command: str, cause: str, words: str) -> None:
    got = _why(cli, _ended(cli, "--", "bash", "-c", command)["job_id"])
    assert got["cause"] == cause and words in got["summary"]
    # The monitor's step, stopped with USR2 at every job's end, is never taken for a cause.
    assert not any("User defined signal 2" in e for e in got["evidence"])
    assert got["certain"] == (cause == "signal")


def test_a_cancel_says_by_whom(cli: Cli) -> None:
    job = cli.submit("--", "sleep", "120")
    cli.wait(job["job_id"], lambda j: j["state"] == "RUNNING", 120)
    cli.ok("cancel", str(job["job_id"]))
    cli.wait(job["job_id"], lambda j: j["terminal"], 60)
    got = _why(cli, job["job_id"])
    me = pwd.getpwuid(os.getuid()).pw_name
    assert got["cause"] == "cancelled" and f"cancelled by {me} (uid {os.getuid()})" in \
        got["summary"]


def test_a_hung_rank_is_a_collective_timeout(cli: Cli) -> None:
    got = _why(cli, _ended(cli, "--nodes", "2", "--", "python", "-m", "pkg.hang")["job_id"])
    assert got["cause"] == "collective_timeout", got
    assert "rank hung or never joined" in got["summary"]


def test_a_dependency_that_can_never_be_met(cli: Cli, devcluster: DevClusterHandle) -> None:
    failing = _ended(cli, "--", "false")
    waiting = cli.submit("--after", str(failing["job_id"]), "--", "true")
    try:
        got = wait_for(lambda: _why(cli, waiting["job_id"]), 120, "DependencyNeverSatisfied",
                       until=lambda g: g["cause"] == "dependency_never_met", poll_s=2)
        assert "can never start" in got["summary"] and "hpctrain cancel" in got["fix"]
        assert got["evidence"] == ["squeue: Reason DependencyNeverSatisfied"]
    finally:
        devcluster.client().scancel([str(waiting["job_id"])])


def test_a_job_waiting_for_nodes_says_so_with_its_start_estimate(
        cli: Cli, devcluster: DevClusterHandle) -> None:
    # Every CPU of both nodes for the first job; the second must wait for them.
    first = cli.submit("--nodes", "2", "--sbatch-arg=--exclusive", "--", "sleep", "120")
    second = cli.submit("--nodes", "2", "--sbatch-arg=--exclusive", "--", "true")
    try:
        cli.wait(first["job_id"], lambda j: j["state"] == "RUNNING", 120)
        got = wait_for(lambda: _why(cli, second["job_id"]), 60, "a reason for the wait",
                       until=lambda g: g["cause"] == "pending"
                       and "squeue: Reason None" not in g["evidence"], poll_s=2)
        assert ("waiting for enough nodes" in got["summary"]
                or "higher priority" in got["summary"]), got
        assert "--time" in got["fix"]
        assert _slurm_calls(cli, second["job_id"]) == ["sacct", "squeue"]  # at most two
    finally:
        devcluster.client().scancel([str(first["job_id"]), str(second["job_id"])])


def test_a_finished_training_gets_next_time_advice(cli: Cli) -> None:
    (cli.cwd / "cfg.yaml").write_text("task: spiral\ntrainer:\n  max_epochs: 2\n")
    job = _ended(cli, "--config", "cfg.yaml", "--time", "10")
    # The time used is sacct's Elapsed, which slurmdbd may record a few seconds after squeue
    # shows the job ended (seen once with four test lanes on two cores): until then `why`
    # rightly gives no time advice.
    got = wait_for(lambda: _why(cli, job["job_id"]), 60, "sacct's record of the time used",
                   until=lambda g: any(a["what"] == "time" for a in g["next_time"]), poll_s=2)
    assert got["cause"] == "completed"
    advice = {a["what"]: a for a in got["next_time"]}
    # Under a minute of a 10-minute limit: far under half, so a shorter --time is advised.
    assert advice["time"]["suggestion"].startswith("`--time 00:05:00`")
    assert advice["host memory"]["asked"].endswith("MiB")


def test_the_time_limit_with_what_would_have_finished_it(cli: Cli) -> None:
    # SLURM's own limit (1 minute): the state TIMEOUT is what is tested here.
    got = _why(cli, _ended(cli, "--time", "1", "--no-requeue", "--", "sleep", "300")["job_id"])
    assert got["cause"] == "time_limit" and "time limit (00:01:00)" in got["summary"]
    assert "--time" in got["fix"] and "--chain" in got["fix"]
    assert any("DUE TO TIME LIMIT" in e for e in got["evidence"])


def test_a_safe_stop_without_requeue_says_how_far_training_got(
        cli: Cli, devcluster: DevClusterHandle) -> None:
    (cli.cwd / "long.yaml").write_text(
        "task: spiral\ntrainer: {max_epochs: 300, batch_size: 256}\ndata: {samples: 16384}\n")
    job = cli.submit("--config", "long.yaml", "--time", "5", "--grace", "10", "--no-requeue")
    run_dir = Path(job["run_dir"])
    wait_for(lambda: (run_dir / "last.ckpt").exists(), 300, "first checkpoint")
    # The limit's warning as SLURM sends it (USR1 to the batch shell), without its timer.
    devcluster.client().run(["scancel", "--batch", "--signal=USR1", str(job["job_id"])])
    cli.wait(job["job_id"], lambda j: j["terminal"], 240)
    got = _why(cli, job["job_id"])
    assert got["cause"] == "time_limit", got
    assert "stopped at the time limit's warning" in got["summary"]
    assert " of 300" in got["summary"] and "--chain" in got["fix"]


def test_a_node_whose_slurmd_dies_is_a_node_failure(
        cli: Cli, devcluster: DevClusterHandle) -> None:
    # The packaged trainer: --no-requeue reaches its script (SLURM would requeue a job whose
    # node failed otherwise, and the job would wait again instead of ending NODE_FAIL).
    (cli.cwd / "long.yaml").write_text(
        "task: spiral\ntrainer: {max_epochs: 3000, batch_size: 256}\ndata: {samples: 16384}\n")
    job = cli.submit("--nodes", "2", "--no-requeue", "--time", "5", "--config", "long.yaml")
    job_id = str(job["job_id"])
    cli.wait(job_id, lambda j: j["state"] == "RUNNING", 120)
    daemons = json.loads(devcluster.cli("devcluster", "status", "--json").stdout)["daemons"]
    pid = next(d["pid"] for d in daemons if d["name"] == "slurmd:node2")
    try:
        os.kill(pid, signal.SIGKILL)
        # slurmctld gives up on the node after SlurmdTimeout (30 s on the dev cluster).
        cli.wait(job_id, lambda j: j["terminal"], 240)
        got = _why(cli, job_id)
        assert got["cause"] == "node_failure", got
        assert "not the job's fault" in got["summary"] and got["headline"] == "node failure"
    finally:
        devcluster.cli("devcluster", "up", timeout_s=120)
        wait_for(lambda: devcluster.client().node_states(), 120, "both nodes back",
                 until=lambda states: all(s in READY_STATES for s in states.values()),
                 poll_s=2)
