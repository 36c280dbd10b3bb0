"""Submit without a cluster: run directory names, log paths, git state, and the run directory
on acceptance, refusal and timeout (sbatch's answers as recorded on the dev cluster)."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from hpctrain.errors import HpctrainError, SlurmError
from hpctrain.history import History
from hpctrain.places import git_state
from hpctrain.plan import JobRequest
from hpctrain.profiles import load_profile
from hpctrain.slurm.runner import Result, SlurmTimeoutError
from hpctrain.submission import prepare as pre
from hpctrain.submission import submit as sub
from hpctrain.values.rundir import RunDir

from .helpers import ReplayClient, here, recorded_jobs, recording

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)

_SBATCH_PATH_LINE = re.compile(r"^#SBATCH\s+--(output|error)=(.*)$", re.MULTILINE)


def _unquote_sbatch(value: str) -> str:
    """Undo render.sbatch_quote: "..." with backslash escapes, or a bare word."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def script_log_patterns(script: str) -> tuple[str | None, str | None]:
    """The --output and --error file patterns a rendered script asks for (a test oracle:
    submit takes them from the plan, never from the script)."""
    found: dict[str, str] = {}
    for m in _SBATCH_PATH_LINE.finditer(script):
        found[m.group(1)] = _unquote_sbatch(m.group(2))
    return found.get("output"), found.get("error")


def test_run_dir_for() -> None:
    cwd = Path("/work/proj")
    assert pre.run_dir_for("hpctrain-runs", "spiral", cwd, NOW, "abc123") == Path(
        "/work/proj/hpctrain-runs/spiral-20260102T030405Z-abc123")
    # Odd job names make tame directory names; absolute output dirs stay where they are.
    assert pre.run_dir_for("/scratch/runs", "my job; rm -rf", cwd, NOW, "x").name == \
        "my_job_rm_-rf-20260102T030405Z-x"
    assert pre.run_dir_for("../runs", "a", cwd, NOW, "x").parent == Path("/work/runs")
    assert pre.run_dir_for("~/runs", "a", cwd, NOW, "x").parent == Path.home() / "runs"
    assert pre.run_dir_for("r", "a", cwd, NOW) != pre.run_dir_for("r", "a", cwd, NOW)


def test_log_patterns_from_rendered_script() -> None:
    script = ('#SBATCH --output="/runs/a b/%x-%j.out"\n'
              "#SBATCH --error=/runs/x/%x-%j.err\n")
    assert script_log_patterns(script) == ("/runs/a b/%x-%j.out", "/runs/x/%x-%j.err")
    assert sub.expand_log_pattern("/r/%x-%j.out", "12", "my %j job", "me") == \
        "/r/my %j job-12.out"
    assert sub.expand_log_pattern("/r/%u/%A-%%.log", "7", "n", "me") == "/r/me/7-%.log"


def test_git_state(tmp_path: Path) -> None:
    assert git_state(tmp_path) is None  # not a repository
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    assert git_state(tmp_path) is None  # no commit yet
    (tmp_path / "f").write_text("1")
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    state = git_state(tmp_path)
    assert state is not None and len(state.commit) == 40 and not state.dirty
    (tmp_path / "untracked").write_text("x")
    assert git_state(tmp_path).dirty is False
    (tmp_path / "f").write_text("2")
    assert git_state(tmp_path).dirty is True


def _prepared(tmp_path: Path, config: Path | None = None) -> pre.Prepared:
    profile = load_profile("local")
    return pre.prepare(JobRequest(profile=profile, job_name="unit",
                                  config=str(config) if config else None,
                                  command=() if config else ("true",)),
                       tmp_path, now=NOW, token="t0")


def test_accepted_job_gets_run_dir_and_history_row(tmp_path: Path) -> None:
    config = tmp_path / "cfg.yaml"
    config.write_text("seed: 3\n")
    prep = _prepared(tmp_path, config)
    client = ReplayClient({"sbatch": recording("sbatch_parsable")})
    history = History(tmp_path / "h.sqlite3")
    done = sub.submit(prep, here(client, tmp_path), history)
    job_id = recorded_jobs()["completed"]
    assert done.job_id == job_id and client.calls == [
        ("sbatch", "--parsable", str(prep.run_dir / "job.sbatch"))]
    assert (prep.run_dir / "job.sbatch").read_text() == prep.script
    assert yaml.safe_load((prep.run_dir / "profile.yaml").read_text())["name"] == "local"
    assert (prep.run_dir / "config-snapshot.yaml").read_text() == "seed: 3\n"
    info = json.loads((prep.run_dir / "run.json").read_text())
    assert info["job_id"] == job_id and info["git"] is None
    assert done.stdout_path == str(prep.run_dir / f"unit-{job_id}.out")
    (row,) = history.all()
    assert row.job_id == job_id and row.run_dir == str(prep.run_dir)
    assert row.stdout_path == done.stdout_path and row.git_commit is None
    assert row.git_dirty is None
    assert done.as_dict(prep.plan)["follow"] == [f"hpctrain status {job_id}",
                                                 f"hpctrain logs -f {job_id}"]


def test_refused_job_leaves_nothing(tmp_path: Path) -> None:
    prep = _prepared(tmp_path)
    client = ReplayClient({"sbatch": recording("sbatch_refused")})
    history = History(tmp_path / "h.sqlite3")
    with pytest.raises(SlurmError, match="Node count specification invalid") as e:
        sub.submit(prep, here(client, tmp_path), history)
    assert "SLURM refused the job" in e.value.what
    assert not prep.run_dir.exists() and history.all() == []


def test_sbatch_timeout_keeps_the_run_dir_marked(tmp_path: Path) -> None:
    prep = _prepared(tmp_path)

    def hang(argv: tuple[str, ...]) -> Result:
        raise SlurmTimeoutError("sbatch did not answer within 10 s: SLURM is down or overloaded")

    history = History(tmp_path / "h.sqlite3")
    with pytest.raises(SlurmTimeoutError, match="may have been queued") as e:
        sub.submit(prep, here(ReplayClient({"sbatch": hang}), tmp_path), history)
    assert "squeue --me" in str(e.value.fix)
    assert RunDir(prep.run_dir).unconfirmed.is_file() and history.all() == []


def test_missing_config_is_refused_before_anything(tmp_path: Path) -> None:
    from hpctrain.submission.kinds import JobKind
    from hpctrain.submission.pipeline import run

    request = JobRequest(profile=load_profile("local"), config=str(tmp_path / "nope.yaml"))
    client = ReplayClient({"sbatch": recording("sbatch_parsable")})
    history = History(tmp_path / "h.sqlite3")
    # The pipeline checks what every kind prepared at the place, a dry run too.
    for dry_run in (True, False):
        with pytest.raises(HpctrainError, match="does not exist"):
            run(JobKind(request), here(client, tmp_path), history, dry_run)
    assert client.calls == [] and not (tmp_path / "hpctrain-runs").exists()


@pytest.mark.parametrize("profile", ["raven", "gilbreth", "marvin", "local"])
def test_prepare_is_a_value_that_touches_nothing(tmp_path: Path, profile: str) -> None:
    workdir = tmp_path / "my \"odd\" dir; echo"
    config = workdir / "cfg.yaml"
    req = JobRequest(profile=load_profile(profile), job_name="unit", account="acc",
                     config="cfg.yaml")
    prep = pre.prepare(req, workdir, now=NOW, token="t0")
    assert not workdir.exists()  # nothing created, not even the working directory
    # Every shipped profile writes under ./hpctrain-runs; NOW is 2026-01-02 03:04:05 UTC.
    assert prep.run_dir == workdir / "hpctrain-runs" / "unit-20260102T030405Z-t0"
    assert prep.sbatch_argv == ("sbatch", "--parsable", str(prep.run_dir / "job.sbatch"))
    script, profile_yaml, request, snapshot = prep.files
    assert (script.path, script.text, script.mode) == (prep.script_path, prep.script, 0o755)
    assert yaml.safe_load(profile_yaml.text or "")["name"] == profile
    # The request as asked (a rerun plans it again): the account, the config's name.
    asked = json.loads(request.text or "")["request"]
    assert request.path == prep.run_dir / "request.json"
    assert (asked["account"], asked["config"], asked["job_name"]) == ("acc", "cfg.yaml", "unit")
    assert snapshot.copy_of == config and snapshot.path == prep.run_dir / "config-snapshot.yaml"
    # The log patterns come from the plan; the script must ask sbatch for the same ones.
    assert script_log_patterns(prep.script) == (prep.logs.stdout, prep.logs.stderr)
    assert prep.logs.stdout == f"{prep.run_dir}/%x-%j.out"


def test_submit_runs_the_prepared_argv_and_expands_its_log_patterns(tmp_path: Path) -> None:
    prep = _prepared(tmp_path)
    client = ReplayClient({"sbatch": recording("sbatch_parsable")})
    done = sub.submit(prep, here(client, tmp_path), History(tmp_path / "h.sqlite3"))
    assert client.calls == [prep.sbatch_argv]
    # The job id sbatch answered when the recording was made; %x-%j is job name and id.
    job_id = recording("sbatch_parsable").stdout.strip()
    assert done.job_id == job_id
    assert done.stdout_path == f"{prep.run_dir}/unit-{job_id}.out"
    assert done.stderr_path == str(prep.run_dir / f"unit-{done.job_id}.err")
    assert json.loads((prep.run_dir / "run.json").read_text())["stderr"] == done.stderr_path
