"""`hpctrain gc` and gc.collect on real stores: what no recorded job needs goes, nothing else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hpctrain.cli import app
from hpctrain.history import History, NewJob, StateUpdate
from hpctrain.snapshots.gc import collect
from hpctrain.snapshots.model import Snapshot
from hpctrain.snapshots.objects import snapshot_ids
from hpctrain.snapshots.spec import code_spec, freeze_here

runner = CliRunner()


def _three_snapshots(project: Path) -> list[tuple[Path, Snapshot]]:
    """Three submits of a project: shared.py in all, one.py / two.py / three.py in turn."""
    (project / "shared.py").parent.mkdir(parents=True, exist_ok=True)
    (project / "shared.py").write_text("SHARED = 1\n")
    made = []
    for i, name in enumerate(("one", "two", "three")):
        for other in ("one", "two", "three"):
            (project / f"{other}.py").unlink(missing_ok=True)
        (project / f"{name}.py").write_text(f"X = {i}\n")
        spec = code_spec(project, project / "hpctrain-runs" / f"job-{i}", ())
        made.append((spec.code_dir.parent, freeze_here(spec)))
    return made


def test_collect_removes_the_unkept_snapshots_and_only_their_files(tmp_path: Path) -> None:
    made = _three_snapshots(tmp_path / "p")
    st = Path(made[0][1].store)
    keep = {made[2][1].id}
    dry = collect(st, keep, dry_run=True, grace_s=0)
    assert sorted(dry.snapshots) == sorted(s.id for _, s in made[:2]) and dry.objects == 2
    assert len(snapshot_ids(st)) == 3  # a dry run removes nothing
    done = collect(st, keep, grace_s=0)
    assert done == dry and snapshot_ids(st) == [made[2][1].id]
    # The kept snapshot still has every file: shared.py was not collected.
    assert (made[2][1].tree / "shared.py").read_text() == "SHARED = 1\n"
    assert (made[2][1].tree / "three.py").read_text() == "X = 2\n"
    assert not made[0][1].tree.exists()
    # Young files are a submit at work: with the default grace nothing goes.
    assert collect(st, set()).snapshots == ()


@pytest.fixture
def history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> History:
    monkeypatch.setenv("HPCTRAIN_HOME", str(tmp_path / "home"))
    return History(tmp_path / "home" / "state" / "history.sqlite3")


def _record(history: History, job_id: str, run_dir: Path, snap: str, *, ended: bool,
            submitted_at: str = "2026-01-01T00:00:00+00:00") -> None:
    row = history.add(NewJob(
        job_id=job_id, cluster="c", profile="local", job_name="j", partition="debug", nodes=1,
        gpus_per_node=1, total_gpus=1, command=["true"], run_dir=str(run_dir),
        script_path=None, stdout_path=None, stderr_path=None, workdir=str(run_dir.parent),
        git_commit=None, git_dirty=None, snapshot=snap, submitted_at=submitted_at))
    if ended:
        history.update([StateUpdate(row.id, "COMPLETED", terminal=True, stale=False)])


def test_gc_keeps_what_recorded_jobs_need(tmp_path: Path, history: History) -> None:
    made = _three_snapshots(tmp_path / "p")
    (run0, s0), (run1, s1), (run2, s2) = made
    _record(history, "1", run0, s0.id, ended=True)  # old and ended
    _record(history, "2", run1, s1.id, ended=False)  # old, still queued
    # Job 3's row is gone (say, another history): its snapshot is not needed.
    res = runner.invoke(app, ["gc", "--min-age", "0", "--json"])
    assert res.exit_code == 0, res.output
    (one,) = json.loads(res.stdout)["stores"]
    assert one["snapshots"] == [s2.id] and one["kept"] == 2
    res = runner.invoke(app, ["gc", "--older-than", "30", "--min-age", "0", "--dry-run"])
    assert res.exit_code == 0 and "would remove 1 snapshot(s)" in res.stdout
    assert sorted(snapshot_ids(Path(s0.store))) == sorted([s0.id, s1.id])
    res = runner.invoke(app, ["gc", "--older-than", "30", "--min-age", "0"])
    assert "removed 1 snapshot(s)" in res.stdout
    # The unfinished job keeps its code however old it is.
    assert snapshot_ids(Path(s0.store)) == [s1.id]


def test_gc_cleans_a_named_store_and_says_when_there_is_none(tmp_path: Path,
                                                             history: History) -> None:
    res = runner.invoke(app, ["gc"])
    assert res.exit_code == 0 and "No snapshot store found" in res.stdout
    made = _three_snapshots(tmp_path / "p")
    st = made[0][1].store
    res = runner.invoke(app, ["gc", "--store", st, "--min-age", "0", "--json"])
    (one,) = json.loads(res.stdout)["stores"]
    assert len(one["snapshots"]) == 3 and one["kept"] == 0
