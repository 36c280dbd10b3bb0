"""Every job runs the code it was submitted with (docs/jobs.md, "Code snapshots"), on the dev
cluster: a held job, a requeued job and a chain's later segment after an edit of the project,
and the same project with --no-snapshot, which runs what is there when the job starts."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from hpctrain.snapshots.objects import manifest_of
from tests.conftest import DevClusterHandle
from tests.jobs.test_jobs_cluster import Cli
from tests.waits import wait_for

# The module a job runs; it appends its version to the run directory's `markers`.
MARK = ("import os, pathlib\n"
        "VERSION = {version!r}\n"
        "with open(pathlib.Path(os.environ['HPCTRAIN_RUN_DIR']) / 'markers', 'a') as f:\n"
        "    f.write(VERSION + ' ' + os.getcwd() + '\\n')\n")


@pytest.fixture
def cli(devcluster: DevClusterHandle, tmp_path: Path) -> Cli:
    cli = Cli(devcluster, tmp_path)
    (cli.cwd / "pkg").mkdir()
    (cli.cwd / "pkg" / "__init__.py").write_text("")
    _edit(cli, "v1")
    (cli.cwd / "data").mkdir()
    (cli.cwd / "data" / "table.csv").write_text("1,2\n")
    return cli


def _edit(cli: Cli, version: str) -> None:
    (cli.cwd / "pkg" / "mark.py").write_text(MARK.format(version=version))


def _markers(run_dir: str, count: int, timeout_s: float = 120) -> list[str]:
    path = Path(run_dir) / "markers"
    text = wait_for(lambda: path.read_text() if path.exists() else "", timeout_s,
                    f"{count} marker line(s) in {path}",
                    until=lambda t: t.count("\n") >= count, poll_s=0.5)
    return [line.split()[0] for line in text.splitlines()]


def test_a_held_job_runs_the_code_of_its_submit_and_no_snapshot_the_code_of_its_start(
        cli: Cli, devcluster: DevClusterHandle) -> None:
    job = ("--sbatch-arg=--hold", "--", "python3", "-m", "pkg.mark")
    frozen = json.loads(cli.ok("submit", "--profile", "local", "--time", "2", "--json",
                               "--snapshot", *job).stdout)
    live = cli.submit("--no-snapshot", *job)
    # Outside git every file is frozen: the module, its package and data/table.csv.
    assert frozen["snapshot"]["files"] == 3 and live["snapshot"] is None
    _edit(cli, "v2")
    devcluster.client().release([frozen["job_id"], live["job_id"]])
    assert _markers(frozen["run_dir"], 1) == ["v1"]
    assert _markers(live["run_dir"], 1) == ["v2"]
    # The job worked in its own directory, made of the snapshot.
    cwd = (Path(frozen["run_dir"]) / "markers").read_text().split()[1]
    assert cwd == str(Path(frozen["run_dir"]) / "code")
    run_json = json.loads((Path(frozen["run_dir"]) / "run.json").read_text())
    assert run_json["snapshot"]["id"] == frozen["snapshot"]["id"]
    status = {j["job_id"]: j for j in json.loads(cli.ok("status", "--json").stdout)["jobs"]}
    assert status[frozen["job_id"]]["snapshot"] == frozen["snapshot"]["id"]
    assert status[live["job_id"]]["snapshot"] is None


def test_a_requeued_job_and_a_later_segment_run_the_submitted_code(cli: Cli,
                                                                   devcluster: DevClusterHandle
                                                                   ) -> None:
    # The first run waits for the test's signal file; the requeued one goes straight on.
    wait_then_mark = ("sh", "-c", 'python3 -m pkg.mark; [ -e "$HPCTRAIN_RUN_DIR/go" ] || '
                      'sleep 600')
    requeued = cli.submit(*("--", *wait_then_mark))
    chain = cli.submit("--chain", "2", "--", "python3", "-m", "pkg.mark")
    _edit(cli, "v2")
    assert _markers(requeued["run_dir"], 1) == ["v1"]
    (Path(requeued["run_dir"]) / "go").write_text("")
    devcluster.client().run(["scontrol", "requeue", requeued["job_id"]])
    assert _markers(requeued["run_dir"], 2) == ["v1", "v1"]
    assert _markers(chain["run_dir"], 2) == ["v1", "v1"]
    assert chain["snapshot"]["added_files"] == 0  # the same project: nothing new stored


def test_in_place_data_is_read_where_it_is(cli: Cli) -> None:
    script = ("import pathlib; print('rows', pathlib.Path('data/table.csv').read_text().strip(),"
              " pathlib.Path('extra.txt').is_symlink())")
    (cli.cwd / "extra.txt").write_text("not frozen")
    done = cli.submit("--in-place", "extra.txt", "--", "python3", "-c", script)
    snap = done["snapshot"]
    frozen = manifest_of(Path(snap["store"]), snap["id"])["files"]
    assert snap["in_place"] == ["extra.txt"] and "extra.txt" not in {f[0] for f in frozen}
    job = cli.wait(done["job_id"], lambda j: j["terminal"])
    assert job["state"] == "COMPLETED", job
    assert "rows 1,2 True" in Path(done["stdout"]).read_text()
    # A path outside the project, and --in-place without a snapshot, are refused.
    res = cli("submit", "--profile", "local", "--in-place", "../x", "--", "true")
    assert res.returncode == 1 and "--in-place ../x: not a path inside the project" in res.stderr
    res = cli("submit", "--profile", "local", "--no-snapshot", "--in-place", "data", "--",
              "true")
    assert res.returncode == 1 and "--no-snapshot makes none" in res.stderr
    # Refused before anything was written: the one run directory and the store.
    assert sorted(os.listdir(cli.cwd / "hpctrain-runs")) == sorted(
        [".gitignore", ".snapshots", Path(done["run_dir"]).name])


def test_what_ran_is_recorded_in_the_run_directory(cli: Cli) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(cli.cwd), "-c", "user.name=t", "-c", "user.email=t@t",
                        *args], check=True, capture_output=True)

    git("init", "-q")
    git("add", "pkg")
    git("commit", "-q", "-m", "v1")
    _edit(cli, "v2")  # uncommitted
    done = cli.submit("--", "python3", "-m", "pkg.mark")
    run_dir = Path(done["run_dir"])
    assert _markers(done["run_dir"], 1) == ["v2"]
    info = json.loads((run_dir / "run.json").read_text())
    assert info["git"]["dirty"] is True and info["snapshot"]["source"] == "git"
    diff = (run_dir / "git.diff").read_text()
    assert "-VERSION = 'v1'" in diff and "+VERSION = 'v2'" in diff
    env = wait_for(lambda: (run_dir / "environment.json").is_file(), 60,
                   "environment.json in the run directory", until=bool)
    assert env
    recorded = json.loads((run_dir / "environment.json").read_text())
    assert recorded["python"].count(".") == 2 and len(recorded["packages_sha256"]) == 64
    assert isinstance(recorded["packages"], dict)
    for name in ("job.sbatch", "profile.yaml"):
        assert (run_dir / name).is_file()


def test_diff_shows_exactly_one_line_of_code_and_one_setting(cli: Cli,
                                                             devcluster: DevClusterHandle
                                                             ) -> None:
    (cli.cwd / "a.yaml").write_text("task: spiral\noptim:\n  lr: 0.01\n")
    (cli.cwd / "b.yaml").write_text("task: spiral\noptim:\n  lr: 0.05\n")
    held = ("--sbatch-arg=--hold", "--time", "10")
    first = cli.submit("--config", "a.yaml", *held)
    _edit(cli, "v2")
    second = cli.submit("--config", "b.yaml", *held)
    devcluster.client().scancel([first["job_id"], second["job_id"]])
    res = cli.ok("diff", first["job_id"], second["job_id"], "--json")
    got = json.loads(res.stdout)
    assert got["settings"] == [{"what": "optim.lr", "a": "0.01", "b": "0.05"}]
    assert got["topology"] == [] and got["environment"] == [] and got["profile"] == []
    changed = [ln for ln in got["code"] if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert changed == ["-VERSION = 'v1'\n", "+VERSION = 'v2'\n"]
    text = cli.ok("diff", first["job_id"], second["job_id"]).stdout
    assert "optim.lr: 0.01 -> 0.05" in text and "+++ b/pkg/mark.py" in text
    same = cli.ok("diff", first["job_id"], first["job_id"]).stdout
    assert same.startswith(f"Jobs {first['job_id']} and {first['job_id']} ran the same code")


def test_rerun_runs_the_same_script_and_settings_on_the_same_code(
        cli: Cli, devcluster: DevClusterHandle) -> None:
    config = "task: spiral\ntrainer:\n  max_epochs: 1\noptim:\n  lr: 0.03\n"
    (cli.cwd / "cfg.yaml").write_text(config)
    first = cli.submit("--config", "cfg.yaml", "--time", "5")
    assert cli.wait(first["job_id"], lambda j: j["terminal"], 300)["state"] == "COMPLETED"
    # Edited since: the rerun must not see any of it.
    _edit(cli, "v2")
    (cli.cwd / "cfg.yaml").write_text(config.replace("0.03", "0.5"))
    again = json.loads(cli.ok("rerun", first["job_id"], "--json").stdout)
    assert again["rerun_of"] == first["job_id"]
    assert again["snapshot"]["id"] == first["snapshot"]["id"]
    assert cli.wait(again["job_id"], lambda j: j["terminal"], 300)["state"] == "COMPLETED"
    run1, run2 = Path(first["run_dir"]), Path(again["run_dir"])
    settings = [json.loads((r / "metrics.json").read_text())["settings"] for r in (run1, run2)]
    assert settings[0] == settings[1] and settings[0]["optim"]["lr"] == 0.03
    script1, script2 = ((r / "job.sbatch").read_text() for r in (run1, run2))
    assert script2 == script1.replace(run1.name, run2.name) and script1 != script2
    assert (run2 / "code" / "pkg" / "mark.py").read_text() == MARK.format(version="v1")
    assert str(again["job_id"]) in cli.ok("status", again["job_id"]).stdout
    # A job that ran in place has no known code to run again.
    live = cli.submit("--no-snapshot", "--sbatch-arg=--hold", "--", "true")
    devcluster.client().scancel([live["job_id"]])
    res = cli("rerun", live["job_id"])
    assert res.returncode == 1 and "ran the project in place" in res.stderr


def test_rerun_on_another_topology_plans_the_same_job_again(
        cli: Cli, devcluster: DevClusterHandle) -> None:
    config = "task: spiral\ntrainer:\n  max_epochs: 1\noptim:\n  lr: 0.03\n"
    (cli.cwd / "cfg.yaml").write_text(config)
    first = cli.submit("--config", "cfg.yaml", "--time", "5")
    assert cli.wait(first["job_id"], lambda j: j["terminal"], 300)["state"] == "COMPLETED"
    _edit(cli, "v2")
    (cli.cwd / "cfg.yaml").write_text(config.replace("0.03", "0.5"))
    again = json.loads(cli.ok("rerun", first["job_id"], "--nodes", "2", "--time", "4",
                              "--json").stdout)
    assert again["snapshot"]["id"] == first["snapshot"]["id"]
    assert cli.wait(again["job_id"], lambda j: j["terminal"], 300)["state"] == "COMPLETED"
    run1, run2 = Path(first["run_dir"]), Path(again["run_dir"])
    settings = [json.loads((r / "metrics.json").read_text())["settings"] for r in (run1, run2)]
    assert settings[0] == settings[1] and settings[0]["optim"]["lr"] == 0.03
    assert "on 2 node(s)" in Path(cli.job(again["job_id"])["stdout"]).read_text()
    assert (run2 / "code" / "pkg" / "mark.py").read_text() == MARK.format(version="v1")
    assert (run2 / "config-snapshot.yaml").read_text() == config
    got = json.loads(cli.ok("diff", first["job_id"], again["job_id"], "--json").stdout)
    assert {c["what"]: (c["a"], c["b"]) for c in got["topology"]}["nodes"] == (1, 2)
    # A short job's warning is a quarter of its --time (the profile's 180 s would not fit):
    # 75 s of 5 minutes, 60 s of 4.
    assert sorted(c["what"] for c in got["settings"]) == ["grace_s", "time"] and got["code"] == []
    shown = json.loads(cli.ok("status", "--json", again["job_id"]).stdout)["jobs"][0]
    assert shown["nodes"] == 2
    # The rerun keeps its own request, with what changed: it can be planned again in its turn.
    kept = json.loads((run2 / "request.json").read_text())["request"]
    assert (kept["nodes"], kept["time"], kept["config"]) == (2, "4", None)
    # Planned again like any submit: the dev cluster's nodes each have GPUs to ask for, and
    # more than they have is refused by name.
    gpu = json.loads(cli.ok("rerun", first["job_id"], "--gpus-per-node", "1", "--json").stdout)
    devcluster.client().scancel([gpu["job_id"]])
    assert cli.job(gpu["job_id"])["gpus_per_node"] == 1
    res = cli("rerun", first["job_id"], "--gpus-per-node", "64")
    assert res.returncode == 1 and "64" in res.stderr, res.stderr
    (run1 / "request.json").unlink()  # as a job submitted before requests were kept
    for again_as in ((), ("--nodes", "2")):
        # A rerun plans the kept request again, whatever it changes: without one, none.
        res = cli("rerun", first["job_id"], *again_as)
        assert res.returncode == 1 and "kept no request.json" in res.stderr
        assert "submit it again from the project" in res.stderr


def test_the_alternatives_of_a_race_run_the_submitted_code(cli: Cli) -> None:
    race = json.loads(cli.ok("submit", "--profile", "local", "--time", "2", "--json",
                             "--first-of", "1x1,2x1", "--", "python3", "-m", "pkg.mark").stdout)
    _edit(cli, "v2")
    run_dir = str(race["run_dir"])
    # The winner's ranks (one per node and GPU) each mark the run, once it has ended; the
    # other alternative bows out before running anything.
    winner = wait_for(lambda: (Path(run_dir) / "race-claim" / "winner").read_text()
                      if (Path(run_dir) / "race-claim" / "winner").exists() else "", 120,
                      "the race's winner", until=bool, poll_s=0.5).split()

    def winner_job() -> dict[str, object]:
        # `status ID` of an alternative lists the whole race: pick the winner's row.
        rows = json.loads(cli.ok("status", winner[0], "--json").stdout)["jobs"]
        return dict(next(r for r in rows if r["job_id"] == winner[0]))

    ended = wait_for(winner_job, 120, f"the end of job {winner[0]}",
                     until=lambda j: bool(j["terminal"]), poll_s=1)
    assert ended["state"] == "COMPLETED"
    nodes, gpus = (int(n) for n in winner[1].split("x"))
    assert _markers(run_dir, nodes * gpus) == ["v1"] * (nodes * gpus)
    scripts = sorted(Path(run_dir).glob("job-*.sbatch"))
    assert len(scripts) == 2 and all(
        f"export HPCTRAIN_CODE_DIR={run_dir}/code" in s.read_text() for s in scripts)
