"""The start-up timeline: the marks' writers (hpctrain.timeline, the batch script's lines), the
import clock, the reader (diagnosis/startup.py) and status, stats and why showing it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hpctrain import progress, timeline
from hpctrain.cli import app
from hpctrain.diagnosis import startup
from hpctrain.history import History, StateUpdate
from hpctrain.slurm.runner import Result
from hpctrain.values.rundir import RunDir
from tests.jobs.helpers import ReplayClient, track

REPO = Path(__file__).resolve().parents[2]
# The rendered script of the 2-node job (test_render.py keeps it equal to the template's output).
SCRIPT = REPO / "tests" / "unit" / "golden" / "local-2nodes.sh"
LAUNCH = ("RANK", "LOCAL_RANK", "NODE_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID",
          "SLURM_JOB_ID", "SLURM_RESTART_COUNT", "HPCTRAIN_RUN_DIR", "SLURMD_NODENAME")
runner = CliRunner()


@pytest.fixture(autouse=True)
def _clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LAUNCH:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    # A timeline of this test's own: the module's holds this process's marks.
    monkeypatch.setattr(timeline, "_timeline", timeline._Timeline())


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- The writers ------------------------------------------------------------------------------

def test_a_mark_goes_to_the_ranks_file_after_the_process_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in (("HPCTRAIN_RUN_DIR", tmp_path), ("SLURMD_NODENAME", "node2"),
                       ("RANK", "3"), ("SLURM_JOB_ID", "77"), ("SLURM_RESTART_COUNT", "1")):
        monkeypatch.setenv(key, str(value))
    before = time.time()
    timeline.mark("data ready", rows=12)
    timeline.mark("first step")
    rows = _rows(RunDir(tmp_path).startup_dir / "node2-3.jsonl")
    assert [r["mark"] for r in rows] == ["process started", "data ready", "first step"]
    assert rows[0]["t"] < before <= rows[1]["t"] <= rows[2]["t"]
    assert rows[1] == {**rows[1], "node": "node2", "rank": 3, "job": "77", "restart": 1,
                       "pid": os.getpid(), "rows": 12}


def test_marks_wait_for_a_run_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    timeline.mark("imports done")
    assert not RunDir(tmp_path).startup_dir.exists()
    timeline.attach(tmp_path / "run")
    timeline.mark("first step")
    rows = _rows(RunDir(tmp_path / "run").startup_dir / f"{_node()}-0.jsonl")
    assert [r["mark"] for r in rows] == ["process started", "imports done", "first step"]
    # A job's run directory wins over the trainer's --run-dir: the batch script's marks are there.
    monkeypatch.setattr(timeline, "_timeline", timeline._Timeline())
    monkeypatch.setenv("HPCTRAIN_RUN_DIR", str(tmp_path / "job"))
    timeline.attach(tmp_path / "elsewhere")
    timeline.mark("first step")
    assert (RunDir(tmp_path / "job").startup_dir / f"{_node()}-0.jsonl").is_file()
    assert not (tmp_path / "elsewhere").exists()


def _node() -> str:
    from hpctrain import progress

    return progress.record_name(progress.node_name(), 0).rsplit("-", 1)[0]


@pytest.mark.parametrize(("env", "rank"), [
    ({}, 0), ({"SLURM_PROCID": "5"}, 5), ({"RANK": "7", "SLURM_PROCID": "1"}, 7),
    # The per-node launcher's workers, and Lightning's local processes.
    ({"NODE_RANK": "1", "LOCAL_WORLD_SIZE": "4", "LOCAL_RANK": "2"}, 6),
    ({"NODE_RANK": "1", "LOCAL_WORLD_SIZE": "4"}, 4), ({"LOCAL_RANK": "1"}, 1),
    # Lightning's second local process inside one srun task: not the task's SLURM_PROCID, or
    # its progress record (the stall watch's) would be its sibling's.
    ({"SLURM_PROCID": "0", "NODE_RANK": "0", "LOCAL_RANK": "1"}, 1),
])
def test_rank_from_the_launchers_variables(env: dict[str, str], rank: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert progress.rank_from_environment() == rank


def _package(root: Path, name: str, body: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(textwrap.dedent(body))


class _Clock:
    """A perf_counter that moves only when a package says it worked: the times are exact."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_the_import_clock_gives_each_package_its_own_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _Clock()
    monkeypatch.setattr(timeline, "time", fake)
    monkeypatch.setitem(sys.modules, "tl_clock", fake)
    _package(tmp_path, "tl_outer", "import tl_clock\nimport tl_inner\ntl_clock.advance(0.15)\n")
    _package(tmp_path, "tl_inner",
             "import tl_clock\ntl_clock.advance(0.3)\nfrom tl_inner import sub\n")
    (tmp_path / "tl_inner" / "sub.py").write_text("import tl_clock\ntl_clock.advance(0.1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    clock = timeline.ImportClock()
    clock.running = True
    sys.meta_path.insert(0, clock)
    try:
        import tl_outer  # type: ignore[import-not-found]  # noqa: F401
    finally:
        sys.meta_path.remove(clock)
        clock.running = False
    # The inner package's 0.4 s (its submodule's too) are its own, not the outer one's.
    assert clock.own == {"tl_outer": pytest.approx(0.15), "tl_inner": pytest.approx(0.4)}
    slowest = clock.slowest(2)
    assert [p["name"] for p in slowest] == ["tl_inner", "tl_outer"]
    assert slowest[0]["via"] == "tl_outer" and slowest[1]["via"] is None
    # The modules are as ever: loaders of their usual type, importable again.
    from importlib.machinery import SourceFileLoader

    assert type(sys.modules["tl_inner"].__spec__.loader) is SourceFileLoader
    for name in ("tl_outer", "tl_inner", "tl_inner.sub"):
        sys.modules.pop(name)


def _batch_marks(run_dir: Path, node: str, job: str) -> None:
    """The batch script's own lines that time and write its marks, run as the script runs them."""
    text = SCRIPT.read_text()
    functions = re.findall(r"^hpctrain_(?:clock|mark)\(\) \{\n.*?^\}\n", text, re.M | re.S)
    calls = re.findall(r"^hpctrain_(?:clock|mark) .*\n", text, re.M)
    assert len(functions) == 2 and len(calls) == 5, (functions, calls)
    env = {**os.environ, "HPCTRAIN_RUN_DIR": str(run_dir), "SLURMD_NODENAME": node,
           "SLURM_JOB_ID": job}
    subprocess.run(["bash", "-c", "".join(functions + calls)], env=env, check=True, timeout=30)


# A rank: a process of its own (its start is the kernel's), importing a slow package.
RANK = """
import sys, time
from hpctrain import timeline
timeline.watch_imports()
import tl_slow
timeline.imports_done()
timeline.mark(timeline.GROUP_FORMED)
timeline.mark(timeline.DATA_READY)
time.sleep(float(sys.argv[1]))
timeline.mark(timeline.FIRST_STEP)
"""


def _ranks(run_dir: Path, tmp_path: Path, job: str, layout: dict[int, str]) -> None:
    _package(tmp_path / "lib", "tl_slow", "import time\ntime.sleep(0.4)\n")
    for rank, node in layout.items():
        env = {**os.environ, "HPCTRAIN_RUN_DIR": str(run_dir), "SLURMD_NODENAME": node,
               "SLURM_JOB_ID": job, "SLURM_PROCID": str(rank),
               "PYTHONPATH": os.pathsep.join([str(tmp_path / "lib"), str(REPO)])}
        subprocess.run([sys.executable, "-c", RANK, "0.3" if rank == 3 else "0"], env=env,
                       check=True, timeout=60)


def test_the_timeline_of_a_two_node_job_and_what_took_most(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _batch_marks(run, "node1", "77")
    _ranks(run, tmp_path, "77", {0: "node1", 1: "node1", 2: "node2", 3: "node2"})
    got = startup.read(run, "77")
    assert got is not None and got.job == "77" and got.origin_name == "job's start"
    assert [(t.node, t.rank) for t in got.batch + got.ranks] == [
        ("node1", None), ("node1", 0), ("node1", 1), ("node2", 2), ("node2", 3)]
    assert [m.name for m in got.batch[0].marks] == [
        "job started", "environment activated", "ranks launched"]
    assert [m.name for m in got.ranks[0].marks] == [
        "process started", "imports done", "process group formed", "data ready", "first step"]
    slowest = got.slowest()
    assert slowest is not None and (slowest.node, slowest.rank) == ("node2", 3)
    total = got.total_s
    assert total is not None and total == pytest.approx(
        slowest.marks[-1].t - got.batch[0].marks[0].t)
    # Every phase of the slowest rank's way, and the longest named with its share.
    phases = {p.name: p.seconds for p in got.phases()}
    assert set(phases) == {"environment", "batch script", "launch", "imports", "process group",
                           "data", "first step"}
    top = max(phases, key=lambda k: phases[k])
    assert got.dominated().startswith(f"{top} {phases[top]:.1f} s of {total:.1f} s")
    imports = got.ranks[3].marks[1]
    assert imports.packages[0].name == "tl_slow" and imports.packages[0].seconds >= 0.4
    lines = got.lines()
    assert lines[0].startswith(f"start-up: first step {total:.1f} s after the job's start "
                               "(slowest: node2 rank 3); ")
    assert lines[1].startswith("  node1 batch script: job started +0.0 s, environment activated")
    assert lines[-1].startswith("  node2 rank 3: process started +")
    data = got.as_dict()
    assert data["slowest"] == {"node": "node2", "rank": 3} and len(data["tracks"]) == 5
    assert data["tracks"][4]["marks"][1]["packages"][0]["name"] == "tl_slow"


def _row(t: float, mark: str, job: str | None = "77", restart: int = 0, rank: int | None = 0,
         **extra: Any) -> dict[str, Any]:
    return {"t": t, "mark": mark, "node": "n1", "rank": rank, "job": job, "restart": restart,
            **extra}


def test_the_attempt_shown_is_the_jobs_last_requeue_else_the_latest() -> None:
    rows = [_row(10, "job started", rank=None), _row(11, "process started"),
            _row(15, "first step"),
            _row(100, "job started", restart=1, rank=None), _row(101, "process started", restart=1),
            _row(130, "imports done", restart=1),
            _row(200, "process started", job="78"), _row(203, "first step", job="78")]
    requeued = startup.build(rows, "77")
    assert requeued is not None and (requeued.job, requeued.restart) == ("77", 1)
    assert requeued.origin == 100 and requeued.total_s == 30
    assert requeued.headline().startswith(
        "start-up: 'imports done' (no first step yet) 30.0 s after the job's start")
    latest = startup.build(rows)
    assert latest is not None and latest.job == "78" and latest.origin_name == (
        "first process's start")
    assert startup.build(rows, "4242") == latest  # an id without marks: the latest attempt
    assert startup.build([{"t": "x"}, "junk", None]) is None


def test_a_rank_started_again_counts_from_its_last_start_and_bad_lines_are_skipped(
        tmp_path: Path) -> None:
    folder = RunDir(tmp_path).startup_dir
    folder.mkdir()
    rows = [_row(1, "process started", job=None), _row(2, "first step", job=None),
            _row(50, "process started", job=None), _row(52, "imports done", job=None,
                                                        packages=[{"name": "torch", "s": 1.5,
                                                                   "via": "lightning"}, "junk"]),
            _row(53, "first step", job=None)]
    (folder / "n1-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows)
                                       + '{"t": 54, "mark": "cut sh')
    got = startup.read(tmp_path)
    assert got is not None and [m.t for m in got.ranks[0].marks] == [50, 52, 53]
    assert got.dominated() == "imports 2.0 s of 3.0 s: lightning -> torch 1.5 s"


def test_many_ranks_show_each_nodes_slowest() -> None:
    rows = [_row(float(r), "first step", rank=r) | {"node": f"n{r // 4}"} for r in range(12)]
    got = startup.build(rows)
    assert got is not None
    assert [line.split(":")[0] for line in got.lines()[1:]] == [
        "  n0 rank 3", "  n1 rank 7", "  n2 rank 11",
        "  (each node's slowest of 12 ranks; `hpctrain stats` shows every rank)"]
    assert len(got.lines(every_rank=True)) == 13


# -- status, stats and why --------------------------------------------------------------------

def _job_run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    folder = RunDir(run).startup_dir
    folder.mkdir(parents=True)
    rows = [_row(100, "job started", rank=None), _row(100.5, "environment activated", rank=None),
            _row(101, "ranks launched", rank=None), _row(101.2, "process started"),
            _row(116.7, "imports done", packages=[{"name": "torchvision", "s": 4.5,
                                                   "via": "torchmetrics"}]),
            _row(117.6, "first step")]
    (folder / "n1-batch.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    (folder / "n1-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[3:]))
    return run


HEADLINE = ("start-up: first step 17.6 s after the job's start (slowest: n1 rank 0); imports "
            "15.5 s of 17.6 s: torchmetrics -> torchvision 4.5 s")


def test_status_of_one_job_shows_its_start_up(tmp_path: Path) -> None:
    history = History()
    (rec,) = track(history, "77", run_dir=str(_job_run_dir(tmp_path)), cluster="nowhere")
    history.update([StateUpdate(id=rec.id, state="COMPLETED", terminal=True, stale=False,
                                exit_code=0, signal=0, elapsed_s=30, node_list="n1")])
    res = runner.invoke(app, ["status", "77"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert f"  {HEADLINE}\n" in res.stdout
    assert "    n1 rank 0: process started +1.2 s, imports done +16.7 s" in res.stdout
    data = json.loads(runner.invoke(app, ["status", "77", "--json"]).stdout)
    assert data["jobs"][0]["startup"]["total_s"] == pytest.approx(17.6)
    # A listing of several jobs reads no run directory.
    track(history, "78", cluster="nowhere")
    listing = json.loads(runner.invoke(app, ["status", "77", "78", "--json"]).stdout)
    assert all("startup" not in job for job in listing["jobs"])


def test_stats_shows_every_ranks_marks(tmp_path: Path) -> None:
    run = _job_run_dir(tmp_path)
    RunDir(run).monitor_dir.mkdir()
    shutil.copy(REPO / "tests" / "monitor" / "recorded" / "devcluster-node1.jsonl",
                RunDir(run).monitor_dir / "node1.jsonl")
    res = runner.invoke(app, ["stats", str(run)], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "Start-up (seconds from the job's start)" in res.stdout
    assert re.search(r"n1\s+0\s+-\s+-\s+-\s+1\.2 s\s+16\.7 s\s+17\.6 s", res.stdout), res.stdout
    assert HEADLINE in res.stdout.replace("\n", " ")
    data = json.loads(runner.invoke(app, ["stats", str(run), "--json"]).stdout)
    assert data["startup"]["dominated"] == HEADLINE.split("; ", 1)[1]


def test_why_shows_the_start_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    case = REPO / "tests" / "diagnosis" / "recorded" / "slurm-24.11" / "exception"
    recorded = json.loads((case / "sacct.json").read_text())
    sacct = Result(tuple(recorded["argv"]), recorded["returncode"], recorded["stdout"],
                   recorded["stderr"])
    client = ReplayClient({"sacct": sacct}, slurm="slurm-24.11")
    monkeypatch.setattr("hpctrain.cli.backends.slurm", lambda: (client, "hpctrain-dev"))
    track(History(), "77", run_dir=str(_job_run_dir(tmp_path)))
    res = runner.invoke(app, ["why", "77"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert f"\n{HEADLINE}\n  n1 batch script: job started +0.0 s" in res.stdout
    data = json.loads(runner.invoke(app, ["why", "77", "--json"]).stdout)
    assert data["startup"]["slowest"] == {"node": "n1", "rank": 0}
