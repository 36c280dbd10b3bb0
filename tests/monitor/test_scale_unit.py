"""Scaling studies: topologies, batches, the table's arithmetic, the plot, the history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpctrain import rundir
from hpctrain.errors import ConfigError, HistoryError, HpctrainError
from hpctrain.history import History, StudyRecord
from hpctrain.jobs import scale
from hpctrain.jobs.study import plan_runs

RECORDED = Path(__file__).parent / "recorded"


def test_topologies_parse_sort_and_refuse() -> None:
    topos = scale.parse_topologies(" 2x4, 1x1 ,1X4")
    assert [t.label for t in topos] == ["1x1", "1x4", "2x4"] and topos[-1].gpus == 8
    for bad in ("", "1x0", "0x2", "2", "1x1,1x1", "1x2;rm", "-1x2", "$(id)x1"):
        with pytest.raises(HpctrainError):
            scale.parse_topologies(bad)


def test_weak_keeps_the_batch_per_gpu_and_strong_splits_the_global_one() -> None:
    topos = scale.parse_topologies("1x1,1x2,2x2")
    assert set(scale.per_device_batches(topos, False, 256).values()) == {256}
    strong = scale.per_device_batches(topos, True, 1024)
    assert [strong[t] for t in topos] == [1024, 512, 256]
    with pytest.raises(HpctrainError, match="does not divide over the GPUs of 2x2"):
        scale.per_device_batches(scale.parse_topologies("1x1,1x2,2x2"), True, 6)


def test_warm_up_epoch_is_left_out_of_the_recorded_metrics() -> None:
    metrics = json.loads((RECORDED / "metrics-2x2.json").read_text())
    epochs = metrics["epochs"]
    m = scale.measure(metrics)
    later = epochs[1:]
    expected = sum(e["samples"] for e in later) / sum(e["train_time_s"] for e in later)
    assert m.epochs_used == len(epochs) - 1 and m.samples_per_s == pytest.approx(expected)
    one = scale.measure({**metrics, "epochs": epochs[:1]})
    assert one.epochs_used == 1
    assert one.samples_per_s == pytest.approx(epochs[0]["samples"] / epochs[0]["train_time_s"])
    assert scale.measure({}).samples_per_s is None


def _result(label: str, state: str, rate: float | None) -> scale.RunResult:
    topo = scale.parse_topologies(label)[0]
    run = scale.run_record(topo, 64, "1", "c", "/nonexistent")
    metrics = None if rate is None else {"epochs": [
        {"samples": 1, "train_time_s": 1}, {"samples": rate * 2, "train_time_s": 2.0}]}
    return scale.RunResult(run, state, metrics)


def test_table_speedup_and_efficiency_against_the_smallest_measured_run() -> None:
    rows = scale.table([_result("1x1", "FAILED", None), _result("1x2", "COMPLETED", 100.0),
                        _result("1x4", "COMPLETED", 180.0), _result("2x4", "OUT_OF_MEMORY", 1.0)])
    by = {r["topology"]: r for r in rows}
    assert by["1x2"]["speedup"] == 1.0 and by["1x2"]["efficiency"] == 1.0
    assert by["1x4"]["speedup"] == 1.8 and by["1x4"]["efficiency"] == 0.9
    assert by["1x4"]["samples_per_s_per_gpu"] == 45.0 and by["1x4"]["global_batch"] == 256
    # Failed and out-of-memory runs stay in the table, without numbers.
    assert by["1x1"]["speedup"] is None and by["1x1"]["state"] == "FAILED"
    assert by["2x4"]["samples_per_s"] is None and by["2x4"]["state"] == "OUT_OF_MEMORY"


def test_report_writes_json_and_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rows = scale.table([_result("1x1", "COMPLETED", 100.0), _result("1x2", "COMPLETED", 190.0),
                        _result("2x2", "TIMEOUT", None)])
    data = scale.report("s1", "weak", rows, tmp_path / "study")
    png = Path(data["plot"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    saved = json.loads((tmp_path / "study" / rundir.SCALING_REPORT).read_text())
    assert [r["state"] for r in saved["runs"]] == ["COMPLETED", "COMPLETED", "TIMEOUT"]


def test_no_plot_without_a_measured_run(tmp_path: Path) -> None:
    rows = scale.table([_result("1x1", "FAILED", None)])
    assert scale.report("s2", "strong", rows, tmp_path)["plot"] is None


def test_studies_in_the_history(tmp_path: Path) -> None:
    history = History(tmp_path / "h.sqlite3")
    runs = [scale.run_record(scale.Topology(1, 2), 8, "12", "dev", "/r")]
    study = history.add_study(StudyRecord(name="a b'; $(x)", profile="local", mode="weak",
                                          directory="/d", runs=runs))
    assert study.id == 1 and history.study("a b'; $(x)") == study == history.study("1")
    runs[0]["job_id"] = "13"
    history.update_study_runs(1, runs)
    assert history.studies()[0].runs[0]["job_id"] == "13"
    with pytest.raises(HistoryError, match="exists already"):
        history.add_study(StudyRecord(name="a b'; $(x)", profile="p", mode="weak",
                                      directory="/d", runs=[]))
    assert history.study("nope") is None and History(tmp_path / "none").studies() == []


def test_a_study_the_trainer_would_refuse_is_refused_before_anything_is_submitted(
    tmp_path: Path,
) -> None:
    config = tmp_path / "mnist.yaml"
    config.write_text("task: mnist\n")
    # The batch size is given, so the trainer's own default is not needed: still checked.
    with pytest.raises(ConfigError, match="--task spiral conflicts with 'task: mnist'"):
        plan_runs("1x1,1x2", strong=False, batch_size=64, task="spiral", config=str(config),
                  sets=[])
    with pytest.raises(ConfigError, match="trainer.no_such_field"):
        plan_runs("1x1", strong=False, batch_size=64, task=None, config=None,
                  sets=["trainer.no_such_field=1"])
    runs = plan_runs("1x1,1x2", strong=True, batch_size=64, task=None, config=str(config),
                     sets=[])
    assert [(t.label, b) for t, b in runs] == [("1x1", 64), ("1x2", 32)]
