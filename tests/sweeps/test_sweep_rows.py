"""A sweep in the history and its report, from values: one row per sweep, the counts, the
metric chosen, the best point, the point arguments the trainer reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpctrain.errors import HpctrainError
from hpctrain.history import History, JobRecord, StateUpdate, StudyRecord
from hpctrain.plan import JobRequest
from hpctrain.profiles import load_profile
from hpctrain.studies import plot
from hpctrain.studies import sweep_report as report
from hpctrain.submission.sweep import point_args
from hpctrain.tracking import selection
from hpctrain.trainconfig.options import TrainerCall, config_args, parse_call
from tests.jobs.helpers import new_job


def _points(history: History, study: int, states: list[str], array: str = "500"
            ) -> list[JobRecord]:
    jobs = [new_job(f"{array}_{t}", study=study, run_dir=f"/runs/sw/points/{t:03d}")
            for t in range(len(states))]
    rows = history.add_all(jobs)
    history.update([_update(r.id, s) for r, s in zip(rows, states, strict=True)])
    return history.by_row_ids([r.id for r in rows])


def _update(row_id: int, state: str) -> StateUpdate:
    return StateUpdate(id=row_id, state=state, terminal=state not in ("RUNNING", "PENDING"),
                       stale=False, exit_code=3 if state == "FAILED" else 0)


def test_a_sweep_is_one_row_counted_over_all_its_points(history: History) -> None:
    study = history.add_study(StudyRecord(name="lr", profile="local", mode="grid",
                                          directory="/runs/sw", runs=[], kind="sweep"))
    assert study.id is not None
    _points(history, study.id, ["COMPLETED", "COMPLETED", "RUNNING", "PENDING", "FAILED",
                                "CANCELLED"])
    alone = history.add(new_job("900"))
    records = selection.with_studies(history, [alone, history.study_jobs(study.id)[2]])
    rows = selection.one_row_per_study(records, selection.study_labels(history))
    assert [r.job_id for r in rows] == ["500", "900"] or [r.job_id for r in rows] == ["900",
                                                                                      "500"]
    (row,) = [r for r in rows if r.job_id == "500"]
    assert row.job_name == ("sweep lr [2/6 done, 1 running, 1 pending, 1 cancelled, "
                            "1 failed]")
    assert row.state == "RUNNING" and not row.terminal
    assert row.run_dir == "/runs/sw"
    assert selection.study_points(history, "lr") == history.study_jobs(study.id)
    with pytest.raises(HpctrainError, match="no study"):
        selection.study_points(history, "nope")


def test_add_all_records_points_in_one_go_and_a_study_can_be_forgotten(
        history: History) -> None:
    study = history.add_study(StudyRecord(name="s", profile="local", mode="list",
                                          directory="/d", runs=[], kind="sweep"))
    rows = history.add_all([new_job(f"7_{t}", study=study.id) for t in range(1500)])
    assert [r.job_id for r in rows[:2]] == ["7_0", "7_1"] and len(rows) == 1500
    assert all(r.state == "PENDING" and r.study == study.id for r in rows)
    assert history.study("s") is not None and history.study("s").kind == "sweep"
    history.delete_study(study.id or 0)
    assert history.study("s") is None


def _metrics(values: list[float], name: str = "val_acc") -> dict[str, object]:
    return {"best_val_metric": name, "best_val_mode": "max", "epochs_completed": len(values),
            "wall_time_s": 12.34, "epochs": [{"epoch": i, "metrics": {name: v}}
                                             for i, v in enumerate(values)]}


def test_metric_is_the_trainers_or_given_with_its_direction() -> None:
    files = [None, _metrics([0.5])]
    assert report.choose_metric(None, files) == report.Metric("val_acc", "max")
    assert report.choose_metric("val_loss", files) == report.Metric("val_loss", "min")
    assert report.choose_metric("val_acc", files) == report.Metric("val_acc", "max")
    assert report.choose_metric("f1_macro", []) == report.Metric("f1_macro", "max")
    assert report.choose_metric("loss:max", []) == report.Metric("loss", "max")
    assert report.choose_metric(None, [None]) is None
    with pytest.raises(HpctrainError, match="max or min"):
        report.choose_metric("val_acc:up", [])


def test_rows_final_best_and_the_best_point(history: History) -> None:
    recs = _points(history, 1, ["COMPLETED", "COMPLETED", "FAILED"])
    metric = report.Metric("val_acc", "max")
    files = [_metrics([0.5, 0.9, 0.8]), _metrics([0.95, 0.7]), None]
    rows = [report.point_row(i, {"optim.lr": str(i)}, r, m, metric)
            for i, (r, m) in enumerate(zip(recs, files, strict=True))]
    assert (rows[0]["final"], rows[0]["best"], rows[0]["epochs"]) == (0.8, 0.9, 3)
    assert rows[0]["time_s"] == 12.3 and rows[0]["why"] is None
    assert rows[2]["why"] == "exit 3" and rows[2]["best"] is None
    assert report.best(rows, metric)["point"] == 1
    assert report.best(rows, report.Metric("val_acc", "min"))["point"] == 0


def test_plot_is_a_png_per_swept_key(tmp_path: Path, history: History) -> None:
    pytest.importorskip("matplotlib")
    recs = _points(history, 1, ["COMPLETED"] * 4)
    metric = report.Metric("val_acc", "max")
    rows = [report.point_row(i, {"optim.lr": lr, "opt": name}, r, _metrics([v]), metric)
            for i, (r, lr, name, v) in enumerate(zip(
                recs, ["0.1", "0.001", "0.01", "0.0001"], ["adam", "sgd", "adam", "sgd"],
                [0.9, 0.7, 0.8, 0.6], strict=True))]
    png = plot.sweep(rows, ["optim.lr", "opt"], "val_acc (best, max)", tmp_path / "s.png",
                     "sweep")
    assert png is not None and png.read_bytes()[:4] == b"\x89PNG"


def test_point_args_win_over_the_shared_settings(tmp_path: Path) -> None:
    """A point's --set comes after the job's own: the trainer reads the point's value."""
    base = TrainerCall(task="spiral", sets=("optim.lr=0.5", "trainer.max_epochs=2")).load()
    request = JobRequest(profile=load_profile("local"), trainer=base)
    args = point_args(request, (("optim.lr", "0.01"), ("trainer.batch_size", "64")))
    assert args == ("--set", "optim.lr=0.01", "--set", "trainer.batch_size=64")
    loaded = parse_call([*config_args(base), *args]).load()
    assert loaded.optim.lr == 0.01 and loaded.trainer.batch_size == 64
    assert loaded.trainer.max_epochs == 2
    own = JobRequest(profile=load_profile("local"), command=("python", "train.py"))
    assert point_args(own, (("optim.lr", "a b; $(x)"),)) == ("optim.lr=a b; $(x)",)


def test_each_report_finds_only_its_own_kind_of_study(history: History) -> None:
    """scale-report without a name takes the last scaling study, never a later sweep."""
    history.add_study(StudyRecord(name="s1", profile="local", mode="weak", directory="/a",
                                  runs=[]))
    history.add_study(StudyRecord(name="lr", profile="local", mode="grid", directory="/b",
                                  runs=[], kind="sweep"))
    assert selection.find_study(history, None, "scale", "scaling study", "x").name == "s1"
    assert selection.find_study(history, None, "sweep", "sweep", "x").name == "lr"
    with pytest.raises(HpctrainError, match="no scaling study 'lr'"):
        selection.find_study(history, "lr", "scale", "scaling study", "hpctrain scale")
    with pytest.raises(HpctrainError, match="no sweep yet") as e:
        selection.find_study(History(history.path.parent / "other.sqlite3"), None, "sweep",
                            "sweep", "hpctrain sweep")
    assert e.value.fix == "start one with `hpctrain sweep`"
