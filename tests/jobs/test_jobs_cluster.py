"""submit, status, logs and cancel against the real dev cluster (profile local, 2 nodes)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from hpctrain.slurm.transport import PROBE_AFTER_S
from hpctrain.slurm.versions import JSON_SINCE, parse_version, version_text
from tests.waits import assert_prompt, timed, wait_for

from .helpers import cluster_env, hpctrain

if TYPE_CHECKING:
    from tests.conftest import DevClusterHandle

pytestmark = pytest.mark.cluster
# What `hpctrain status` shows, COMPLETING before COMPLETED (which it does not contain).
STATES = ("PENDING", "RUNNING", "COMPLETING", "COMPLETED", "FAILED")


class Cli:
    """hpctrain against the dev cluster, with a history and working directory of its own."""

    def __init__(self, cluster: DevClusterHandle, tmp_path: Path, **env: str) -> None:
        self.cluster = cluster
        self.home = tmp_path / "home"
        self.cwd = tmp_path / "work"
        self.cwd.mkdir(exist_ok=True)
        # A wide console: rich wraps table cells at 80 columns when output is piped.
        self.env = cluster_env(cluster.slurm_conf, self.home, COLUMNS="200", **env)

    def __call__(self, *args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        return hpctrain(*args, env=self.env, cwd=self.cwd, timeout_s=timeout_s)

    def ok(self, *args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        res = self(*args, timeout_s=timeout_s)
        assert res.returncode == 0, f"hpctrain {' '.join(args)}:\n{res.stdout}\n{res.stderr}"
        return res

    def submit(self, *args: str) -> dict[str, Any]:
        res = self.ok("submit", "--profile", "local", "--time", "2", "--json", *args)
        return dict(json.loads(res.stdout))

    def job(self, job_id: str) -> dict[str, Any]:
        (job,) = json.loads(self.ok("status", job_id, "--json").stdout)["jobs"]
        return dict(job)

    def wait(self, job_id: str, done: Callable[[dict[str, Any]], bool],
             timeout_s: float = 90.0) -> dict[str, Any]:
        return wait_for(lambda: self.job(job_id), timeout_s, f"wanted state of job {job_id}",
                        until=done, poll_s=1)

    @property
    def db(self) -> Path:
        return self.home / "state" / "history.sqlite3"


@pytest.fixture
def cli(devcluster: DevClusterHandle, tmp_path: Path) -> Cli:
    return Cli(devcluster, tmp_path)


def test_done_when_two_nodes_printenv(cli: Cli, devcluster: DevClusterHandle) -> None:
    """The issue's done-when, as a user types it."""
    res = cli.ok("submit", "--profile", "local", "--nodes", "2", "--", "printenv",
                 "SLURMD_NODENAME")
    job_id = res.stdout.split("Submitted job ", 1)[1].split()[0]
    assert job_id.isdigit()
    assert f"hpctrain status {job_id}" in res.stdout and f"hpctrain logs -f {job_id}" in res.stdout
    assert job_id in cli.ok("status").stdout
    logs = cli.ok("logs", "-f", timeout_s=120)
    names = {ln.strip() for ln in logs.stdout.splitlines()}
    assert set(devcluster.node_names) <= names, logs.stdout
    assert f"job {job_id} COMPLETED" in logs.stderr
    job = cli.job(job_id)
    assert job["state"] == "COMPLETED" and job["terminal"] and job["exit_code"] == 0
    assert job["nodes"] == 2 and job["gpus_per_node"] == 2 and job["total_gpus"] == 4
    assert job["node_list"] == "node[1-2]"


def test_pending_running_completed_each_shown(cli: Cli) -> None:
    sub = cli.submit("--sbatch-arg=--begin=now+6", "--", "bash", "-c",
                     "echo started; sleep 6; echo finished")
    job_id = sub["job_id"]
    seen: list[str] = []
    tables: dict[str, list[str]] = {}

    def completed() -> bool:
        res = cli.ok("status")
        rows = [ln for ln in res.stdout.splitlines() if ln.split()[:1] == [job_id]]
        assert rows, res.stdout
        states = [s for s in STATES if s in rows[0]]
        assert states, rows[0]
        if not seen or seen[-1] != states[0]:
            seen.append(states[0])
        tables.setdefault(states[0], []).append(rows[0])
        return states[0] in ("COMPLETED", "FAILED")

    wait_for(completed, 90, f"end of job {job_id} (states seen: {seen})", poll_s=0.7)
    # COMPLETING passes in a moment (the epilog): a poll may or may not catch it.
    assert [s for s in seen if s != "COMPLETING"] == ["PENDING", "RUNNING", "COMPLETED"], seen
    # The scheduler names the reason on its first pass over the job.
    assert any("BeginTime" in row for row in tables["PENDING"]), tables["PENDING"]
    assert all("node" in row for row in tables["RUNNING"])
    out = Path(sub["stdout"]).read_text()
    assert "started" in out and "finished" in out
    # The finished job is cached: asking again costs no SLURM call.
    again = json.loads(cli.ok("status", job_id, "--json").stdout)
    assert again["slurm_calls"] == 0 and again["jobs"][0]["terminal"]


def test_failing_job_shows_failed_with_exit_code(cli: Cli) -> None:
    job_id = cli.submit("--", "bash", "-c", "echo about to fail >&2; exit 3")["job_id"]
    logs = cli("logs", "-f", "--err", job_id)
    assert "about to fail" in logs.stdout
    # `logs -f JOB && next` must not go on: exit 1, the state the last line on stderr.
    assert logs.returncode == 1 and "Traceback" not in logs.stderr, logs.stderr
    assert logs.stderr.rstrip().endswith(f"job {job_id} FAILED (exit code 3)")
    job = cli.job(job_id)
    assert job["state"] == "FAILED" and job["exit_code"] == 3 and job["terminal"]
    assert "exit 3" in cli.ok("status", job_id).stdout


def test_debug_shows_each_slurm_command_in_the_form_this_slurm_answers(cli: Cli) -> None:
    """JSON on 23.02 and later, text before; --debug says which, and both read the same state
    (this file also runs on SLURM 24.11: scripts/test.sh)."""
    version = parse_version(cli.cluster.client().run(["sinfo", "--version"]).stdout)
    job_id = cli.submit("--", "sleep", "60")["job_id"]
    cli.wait(job_id, lambda j: j["state"] == "RUNNING")
    json_out = version >= JSON_SINCE
    res = cli.ok("--debug", "status", job_id, "--json")
    said = f"SLURM {version_text(version)}: {'JSON' if json_out else 'text'} output"
    assert f"debug: hpctrain.slurm: {said}" in res.stderr, res.stderr
    assert ("squeue --json" in res.stderr) == json_out, res.stderr
    text = Cli(cli.cluster, cli.home.parent, HPCTRAIN_SLURM_JSON="0")
    forced = text.ok("--debug", "status", job_id, "--json")
    assert "(HPCTRAIN_SLURM_JSON=0)" in forced.stderr and "squeue --json" not in forced.stderr
    for out in (res.stdout, forced.stdout):
        (job,) = json.loads(out)["jobs"]
        assert job["state"] == "RUNNING" and not job["terminal"]
    cli.ok("cancel", job_id)


def test_cancelled_job_shows_cancelled(cli: Cli) -> None:
    job_id = cli.submit("--", "sleep", "100")["job_id"]
    cli.wait(job_id, lambda j: j["state"] == "RUNNING")
    res = cli.ok("cancel", job_id, "--json")
    assert json.loads(res.stdout) == {"cancelled": [job_id], "skipped": []}
    job = cli.wait(job_id, lambda j: j["terminal"])
    assert job["state"] == "CANCELLED"
    again = json.loads(cli.ok("cancel", job_id, "--json").stdout)
    assert again == {"cancelled": [], "skipped": [{"job_id": job_id,
                                                   "reason": "already CANCELLED"}]}


def test_dependency_shows_pending_reason_and_cancel_all(cli: Cli) -> None:
    first = cli.submit("--", "sleep", "100")["job_id"]
    second = cli.submit("--after", str(first), "--", "true")["job_id"]
    job = cli.wait(second, lambda j: j["reason"] == "Dependency", timeout_s=30)
    assert job["state"] == "PENDING" and not job["terminal"]
    assert "Dependency" in cli.ok("status", second).stdout
    # --all asks first; without a terminal and without --yes it refuses.
    refused = cli("cancel", "--all")
    assert refused.returncode == 1 and "--yes" in refused.stderr
    assert cli.job(first)["state"] in ("PENDING", "RUNNING")
    res = cli.ok("cancel", "--all", "--yes", "--json")
    assert sorted(json.loads(res.stdout)["cancelled"]) == sorted([first, second])
    for job_id in (first, second):
        assert cli.wait(job_id, lambda j: j["terminal"])["state"] == "CANCELLED"


def test_unknown_ids_are_clear_errors(cli: Cli) -> None:
    for args in (("cancel", "999999"), ("status", "999999"), ("logs", "999999")):
        res = cli(*args)
        assert res.returncode == 1 and "999999 is not in the history" in res.stderr, res.stderr
        assert "Traceback" not in res.stderr


def test_sbatch_refusal_shows_slurms_words_and_records_nothing(cli: Cli) -> None:
    res = cli("submit", "--profile", "local", "--sbatch-arg=--begin=notatime", "--", "true")
    assert res.returncode == 1
    assert "Error: SLURM refused the job" in res.stderr and "sbatch: error" in res.stderr
    # No run directory; the snapshot store beside them is a cache a later submit reuses.
    assert not (cli.cwd / "hpctrain-runs").exists() or not any(
        p.name not in (".snapshots", ".gitignore") for p in (cli.cwd / "hpctrain-runs").iterdir())
    assert not cli.db.exists() or sqlite3.connect(cli.db).execute(
        "SELECT COUNT(*) FROM jobs").fetchone()[0] == 0


def test_run_dir_holds_script_profile_git_and_logs(cli: Cli) -> None:
    git = ["git", "-C", str(cli.cwd), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (cli.cwd / "train.py").write_text("print('hi')\n")
    subprocess.run([*git, "add", "train.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    (cli.cwd / "train.py").write_text("print('changed')\n")
    (cli.cwd / "my config.yaml").write_text("seed: 1\n")
    sub = cli.submit("--job-name", "odd name", "--", "bash", "-c", "echo in $HPCTRAIN_RUN_DIR")
    run_dir = Path(sub["run_dir"])
    assert run_dir.parent == cli.cwd / "hpctrain-runs" and run_dir.name.startswith("odd_name-")
    assert sub["git"] == {"commit": commit, "dirty": True}
    assert {p.name for p in run_dir.iterdir()} >= {"job.sbatch", "profile.yaml", "run.json"}
    script = (run_dir / "job.sbatch").read_text()
    assert f"{run_dir}/%x-%j.out" in script and script.startswith("#!/bin/bash")
    info = json.loads((run_dir / "run.json").read_text())
    assert info["job_id"] == sub["job_id"] and info["git"]["commit"] == commit
    cli.ok("logs", "-f", sub["job_id"])
    assert Path(sub["stdout"]) == run_dir / f"odd name-{sub['job_id']}.out"
    assert Path(sub["stdout"]).read_text().strip().endswith(f"in {run_dir}")
    job = cli.job(sub["job_id"])
    assert job["git_commit"] == commit and job["git_dirty"] is True
    assert job["workdir"] == str(cli.cwd)


def test_secrets_reach_the_job_but_are_never_stored(devcluster: DevClusterHandle,
                                                    tmp_path: Path) -> None:
    secret = "s3cr3t-value-do-not-store"
    cli = Cli(devcluster, tmp_path, MY_API_KEY=secret)
    sub = cli.submit("--", "printenv", "MY_API_KEY")
    cli.ok("logs", "-f", sub["job_id"])
    assert Path(sub["stdout"]).read_text().strip().endswith(secret)
    files = [*Path(sub["run_dir"]).iterdir(), *cli.db.parent.iterdir()]
    assert cli.db in files
    for f in files:
        if f.is_file() and f != Path(sub["stdout"]):
            assert secret.encode() not in f.read_bytes(), f


def test_logs_tail_and_no_output_yet(cli: Cli) -> None:
    sub = cli.submit("--sbatch-arg=--begin=now+30", "--", "seq", "1", "50")
    res = cli("logs", sub["job_id"])
    assert res.returncode == 1 and "no output file yet" in res.stderr and "logs -f" in res.stderr
    cli.ok("cancel", sub["job_id"])
    sub = cli.submit("--", "seq", "1", "50")
    cli.ok("logs", "-f", sub["job_id"])
    assert cli.ok("logs", "--tail", "3").stdout.splitlines() == ["48", "49", "50"]


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_slurm_down_is_a_fast_clear_error(cli: Cli, tmp_path: Path) -> None:
    """slurmctld unreachable (a copy of slurm.conf pointing at a closed port)."""
    job_id = cli.submit("--", "sleep", "30")["job_id"]
    # A comparable call that reaches the live controller, under this machine's present load
    # (first: `status` refreshes the rows compared below).
    baseline = max(timed(cli.ok, *args)[1] for args in (
        ("status",), ("status",), ("submit", "--profile", "local", "--dry-run", "--", "true")))
    before = sqlite3.connect(cli.db).execute("SELECT * FROM jobs").fetchall()
    down = tmp_path / "slurm-down.conf"
    lines = cli.cluster.slurm_conf.read_text().splitlines()
    down.write_text("\n".join(
        f"SlurmctldPort={_closed_port()}" if ln.startswith("SlurmctldPort=")
        else "MessageTimeout=2" if ln.startswith("MessageTimeout=") else ln
        for ln in lines) + "\n")
    cli.env["SLURM_CONF"] = str(down)
    for args in (("status",), ("status", "--json"), ("cancel", job_id),
                 ("submit", "--profile", "local", "--", "true")):
        res, took = timed(cli, *args)
        assert res.returncode == 1 and res.stderr.startswith("Error:"), res.stderr
        assert "Traceback" not in res.stderr, (args, res.stderr)
        # The port probe after PROBE_AFTER_S finds the refusal; SLURM's own commands would
        # retry for MessageTimeout first.
        assert_prompt(took, baseline, " ".join(args), plus_s=PROBE_AFTER_S)
    after = sqlite3.connect(cli.db).execute("SELECT * FROM jobs").fetchall()
    assert after == before
    runs = [p for p in (cli.cwd / "hpctrain-runs").iterdir()
            if p.name not in (".snapshots", ".gitignore")]
    assert len(runs) == 1  # the refused submit left no run directory
    cli.env["SLURM_CONF"] = str(cli.cluster.slurm_conf)
    cli.ok("cancel", job_id)


def test_twenty_concurrent_submits(cli: Cli) -> None:
    """20 `hpctrain submit` processes at once: 20 jobs in SLURM, 20 rows, none lost."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "hpctrain", "submit", "--profile", "local", "--time", "1",
             "--job-name", f"c{i}", "--json", "--", "true"],
            env=cli.env, cwd=cli.cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            stdin=subprocess.DEVNULL,
        )
        for i in range(20)
    ]
    results = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in results]
    ids = {json.loads(out)["job_id"] for out, _ in results}
    assert len(ids) == 20
    rows = sqlite3.connect(cli.db).execute("SELECT job_id, run_dir FROM jobs").fetchall()
    assert {r[0] for r in rows} == ids and len({r[1] for r in rows}) == 20
    status = json.loads(cli.ok("status", "--all", "--json").stdout)
    assert {j["job_id"] for j in status["jobs"]} == ids
    assert status["slurm_calls"] <= 2
    # SLURM knows every one of them (slurmdbd may take a moment to hear of the last ones).
    def accounted() -> set[str]:
        known = cli.cluster.client().run(
            ["sacct", "-X", "-n", "-P", "-o", "JobIDRaw", "-j", ",".join(sorted(ids))]).stdout
        return set(known.split())

    wait_for(accounted, 120, f"accounting of all of {sorted(ids)}", until=ids.__eq__, poll_s=1)
