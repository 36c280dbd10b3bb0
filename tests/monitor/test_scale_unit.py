"""Scaling studies: topologies, batches, the table's arithmetic, the plot, the history."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hpctrain.errors import ConfigError, HistoryError, HpctrainError
from hpctrain.history import History, StudyRecord
from hpctrain.studies import scaling_table
from hpctrain.submission.scaling_study import plan_runs
from hpctrain.trainconfig.options import TrainerCall
from hpctrain.values.rundir import RunDir

RECORDED = Path(__file__).parent / "recorded"


def test_topologies_parse_sort_and_refuse() -> None:
    topos = scaling_table.parse_topologies(" 2x4, 1x1 ,1X4")
    assert [t.label for t in topos] == ["1x1", "1x4", "2x4"] and topos[-1].gpus == 8
    for bad in ("", "1x0", "0x2", "2", "1x1,1x1", "1x2;rm", "-1x2", "$(id)x1"):
        with pytest.raises(HpctrainError):
            scaling_table.parse_topologies(bad)


def test_weak_keeps_the_batch_per_gpu_and_strong_splits_the_global_one() -> None:
    topos = scaling_table.parse_topologies("1x1,1x2,2x2")
    assert set(scaling_table.per_device_batches(topos, False, 256).values()) == {256}
    strong = scaling_table.per_device_batches(topos, True, 1024)
    assert [strong[t] for t in topos] == [1024, 512, 256]
    with pytest.raises(HpctrainError, match="does not divide over the GPUs of 2x2"):
        scaling_table.per_device_batches(scaling_table.parse_topologies("1x1,1x2,2x2"), True, 6)


def _recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / "metrics-2x2.json").read_text())
    return data


def metrics(rates: list[float], val_acc: list[float] | None = None) -> dict[str, Any]:
    """The recorded metrics.json with one epoch per rate (samples/s of its train phase)."""
    real = _recorded()
    template = real["epochs"][0]
    accs = val_acc or [0.5] * len(rates)
    epochs = [{**template, "epoch": i + 1, "samples": 32000, "train_time_s": 32000 / rate,
               "samples_per_s": rate, "time_s": 32000 / rate + 0.05,
               "metrics": {**template["metrics"], "val_acc": acc}}
              for i, (rate, acc) in enumerate(zip(rates, accs, strict=True))]
    return {**real, "epochs": epochs, "epochs_completed": len(epochs)}


def test_warm_up_epoch_is_left_out_of_the_recorded_metrics() -> None:
    real = _recorded()
    epochs = real["epochs"]
    assert scaling_table.epoch_rates(real) == pytest.approx(
        [e["samples"] / e["train_time_s"] for e in epochs[1:]])
    one = {**real, "epochs": epochs[:1]}
    assert scaling_table.epoch_rates(one) == pytest.approx(
        [epochs[0]["samples"] / epochs[0]["train_time_s"]])
    # An epoch without counted samples is no measurement; a file without epochs has its total.
    assert scaling_table.epoch_rates(metrics([1.0, 2.0]) | {"epochs": [epochs[0], {
        **epochs[1], "samples": None}]}) == []
    assert scaling_table.epoch_rates({"samples_per_s": 5.0}) == [5.0]
    assert scaling_table.epoch_rates({}) == []


def test_median_range_and_quartiles() -> None:
    s = scaling_table.spread([3.0, 1.0, 10.0, 2.0])
    assert s is not None
    assert (s.median, s.low, s.high, s.count) == (2.5, 1.0, 10.0, 4)
    assert (s.q1, s.q3) == pytest.approx((1.75, 4.75)) and s.ratio == 10.0
    assert scaling_table.spread([]) is None
    single = scaling_table.spread([7.0])
    assert single is not None and (single.median, single.q1, single.q3) == (7.0, 7.0, 7.0)


def test_a_recorded_run_beside_cpu_hogs_is_noisy() -> None:
    loaded = json.loads((RECORDED / "metrics-1x1-loaded.json").read_text())
    rates = scaling_table.epoch_rates(loaded)
    assert len(rates) == 7 and rates == pytest.approx(
        [e["samples"] / e["train_time_s"] for e in loaded["epochs"][1:]])
    (row,) = scaling_table.table([scaling_table.RunResult(
        scaling_table.run_record(scaling_table.Topology(1, 1), 8192, loaded["slurm_job_id"],
                                 "dev", "/r"),
        "COMPLETED", loaded)], scaling_table.parse_target("val_acc=0.6"))
    # Epochs 2-5 beside the hogs (140k-258k/s), 6-8 without (1.09M-1.21M/s).
    assert row["noisy"] and row["rate_ratio"] == pytest.approx(8.6, abs=0.05)
    assert row["samples_per_s"] == pytest.approx(257566.0, abs=1)
    assert row["time_to_target_s"] == pytest.approx(
        loaded["startup_s"] + loaded["epochs"][0]["time_s"], abs=0.01)


def test_noisy_is_a_spread_of_more_than_one_and_a_half() -> None:
    assert not scaling_table.is_noisy(scaling_table.spread([100.0, 150.0]))
    assert scaling_table.is_noisy(scaling_table.spread([100.0, 151.0]))
    assert not scaling_table.is_noisy(scaling_table.spread([100.0]))
    assert not scaling_table.is_noisy(None)


def _result(label: str, state: str, rate: float | None, *, repeat: int = 1,
            rates: list[float] | None = None, batch: int = 64) -> scaling_table.RunResult:
    topo = scaling_table.parse_topologies(label)[0]
    run = scaling_table.run_record(topo, batch, str(repeat), "c", "/nonexistent", repeat=repeat)
    epochs = rates if rates is not None else None if rate is None else [1.0, rate]
    return scaling_table.RunResult(run, state, None if epochs is None else metrics(epochs))


def test_a_topology_is_the_median_over_every_epoch_of_every_repeat() -> None:
    rows = scaling_table.table([
        _result("1x1", "COMPLETED", None, repeat=1, rates=[5.0, 100.0, 110.0]),
        _result("1x2", "COMPLETED", None, repeat=1, rates=[5.0, 180.0, 190.0]),
        _result("1x1", "COMPLETED", None, repeat=2, rates=[5.0, 90.0, 120.0]),
        _result("1x2", "COMPLETED", None, repeat=2, rates=[5.0, 200.0, 170.0]),
    ])
    one, two = rows
    # Warm-up epochs (5/s) left out; the median of 90, 100, 110, 120, not a mean or a sum.
    assert (one["topology"], one["samples_per_s"], one["epochs_measured"]) == ("1x1", 105.0, 4)
    assert one["samples_per_s_range"] == [90.0, 120.0] and not one["noisy"]
    assert [p["repeat"] for p in one["repeats"]] == [1, 2] and one["job_ids"] == ["1", "2"]
    assert one["repeats"][1]["epoch_samples_per_s"] == [90.0, 120.0]
    # Speedup from the medians (185 / 105), its range from 1x2's min..max.
    assert two["speedup"] == round(185 / 105, 3) and two["efficiency"] == round(185 / 210, 3)
    assert two["speedup_range"] == [round(170 / 105, 3), round(200 / 105, 3)]
    assert two["implausible"] is None and two["rate_ratio"] == round(200 / 170, 2)


def test_table_speedup_and_efficiency_against_the_smallest_measured_run() -> None:
    rows = scaling_table.table([_result("1x1", "FAILED", None), _result("1x2", "COMPLETED", 100.0),
                        _result("1x4", "COMPLETED", 180.0), _result("2x4", "OUT_OF_MEMORY", 1.0)])
    by = {r["topology"]: r for r in rows}
    assert by["1x2"]["speedup"] == 1.0 and by["1x2"]["efficiency"] == 1.0
    assert by["1x4"]["speedup"] == 1.8 and by["1x4"]["efficiency"] == 0.9
    assert by["1x4"]["samples_per_s_per_gpu"] == 45.0 and by["1x4"]["global_batch"] == 256
    # Failed and out-of-memory runs stay in the table, without numbers.
    assert by["1x1"]["speedup"] is None and by["1x1"]["state"] == "FAILED"
    assert by["2x4"]["samples_per_s"] is None and by["2x4"]["state"] == "OUT_OF_MEMORY"


def test_repeats_that_ended_differently_are_counted_and_the_rest_measured() -> None:
    (row,) = scaling_table.table([_result("1x1", "COMPLETED", 100.0, repeat=1),
                          _result("1x1", "FAILED", None, repeat=2),
                          _result("1x1", "COMPLETED", 120.0, repeat=3)])
    assert row["state"] == "2 COMPLETED, 1 FAILED" and row["samples_per_s"] == 110.0
    # A study recorded before repeats existed: its runs have no `repeat`, each is one.
    old = {k: v for k, v in _result("1x1", "COMPLETED", 50.0).run.items() if k != "repeat"}
    (row,) = scaling_table.table([scaling_table.RunResult(old, "COMPLETED", metrics([1.0, 50.0]))])
    assert row["repeats"][0]["repeat"] == 1 and row["samples_per_s"] == 50.0


def test_an_efficiency_above_1_1_is_flagged_with_its_likely_cause() -> None:
    # Base 1x1 loaded: epochs at 40..100/s, median 50; 1x2 at 130/s: 130 %.
    loaded = scaling_table.table([_result("1x1", "COMPLETED", None, rates=[1.0, 40.0, 50.0, 100.0]),
                          _result("1x2", "COMPLETED", 130.0)])
    base, two = loaded
    assert base["noisy"] and base["rate_ratio"] == 2.5 and base["implausible"] is None
    assert two["efficiency"] == 1.3 and two["implausible"].startswith(
        "load on the node: the base run 1x1 was noisy (its epochs ran at 40..100 samples/s)")
    # Strong scaling: 1x2 trains with half the per-device batch.
    strong = scaling_table.table([_result("1x1", "COMPLETED", 100.0, batch=64),
                          _result("1x2", "COMPLETED", 230.0, batch=32)])
    assert strong[1]["implausible"].startswith("a different per-device batch (32 here, 64 in")
    quiet = scaling_table.table([_result("1x1", "COMPLETED", 100.0),
                                 _result("1x2", "COMPLETED", 230.0)])
    assert quiet[1]["implausible"].startswith("a cache or warm-up effect")
    # 1.1 itself is plausible.
    edge = scaling_table.table([_result("1x1", "COMPLETED", 100.0),
                                _result("1x2", "COMPLETED", 220.0)])
    assert edge[1]["efficiency"] == 1.1 and edge[1]["implausible"] is None


def test_target_syntax() -> None:
    assert scaling_table.parse_target("val_acc=0.9") == scaling_table.Target("val_acc", ">=", 0.9)
    assert scaling_table.parse_target(" val_loss = 0.2") == scaling_table.Target(
        "val_loss", "<=", 0.2)
    assert scaling_table.parse_target("val_acc<=0.3").label == "val_acc<=0.3"
    assert scaling_table.parse_target("train_error=1e-2").op == "<="
    assert scaling_table.parse_target("val_loss>=2").op == ">="
    for bad in ("val_acc", "=0.9", "val_acc=abc", "val_acc=nan", "val_acc>0.9", "a;b=1",
                "val_acc=0.9=1", "val_acc=inf"):
        with pytest.raises(HpctrainError, match="is not METRIC=VALUE"):
            scaling_table.parse_target(bad)


def test_time_to_target_from_the_recorded_epochs() -> None:
    real = _recorded()
    times = [e["time_s"] for e in real["epochs"]]  # val_acc: 0.667, 0.660, 0.631
    to = scaling_table.time_to_target
    assert to(real, scaling_table.parse_target("val_acc=0.66")) == times[0]
    assert to(real, scaling_table.parse_target("val_loss<=0.64")) == pytest.approx(sum(times))
    assert scaling_table.time_to_target(real, scaling_table.parse_target("val_acc=0.9")) is None
    assert scaling_table.time_to_target(real, scaling_table.parse_target("no_such=1")) is None
    # The trainer's startup counts: the time is from its process's start.
    assert scaling_table.time_to_target({**real, "startup_s": 6.0}, scaling_table.parse_target(
        "val_acc=0.66")) == pytest.approx(6.0 + times[0])


def test_the_table_has_each_topologys_time_to_the_target() -> None:
    target = scaling_table.parse_target("val_acc=0.9")

    def run(label: str, repeat: int, accs: list[float]) -> scaling_table.RunResult:
        r = _result(label, "COMPLETED", None, repeat=repeat, rates=[10.0] * len(accs))
        assert r.metrics is not None
        return replace(r, metrics={**metrics([10.0] * len(accs), accs), "startup_s": 1.0})

    per_epoch = 32000 / 10.0 + 0.05
    rows = scaling_table.table([run("1x1", 1, [0.5, 0.95]), run("1x1", 2, [0.5, 0.6]),
                        run("1x1", 3, [0.91, 0.95]), run("1x2", 1, [0.5, 0.6])], target)
    one, two = rows
    assert one["target"] == "val_acc>=0.9" and one["target_reached"] == 2
    assert one["time_to_target_s"] == pytest.approx(1.0 + 1.5 * per_epoch, abs=0.01)
    assert [p["time_to_target_s"] for p in one["repeats"]] == [
        round(1.0 + 2 * per_epoch, 2), None, round(1.0 + per_epoch, 2)]
    assert two["target_reached"] == 0 and two["time_to_target_s"] is None
    assert scaling_table.table([run("1x1", 1, [0.5])])[0]["target_reached"] is None


def test_the_cli_table_marks_noisy_and_implausible_rows() -> None:
    from hpctrain.cli.scale import _columns, _notes, _table_row

    rows = scaling_table.table([_result("1x1", "COMPLETED", None, rates=[1.0, 40.0, 50.0, 100.0]),
                                _result("1x2", "COMPLETED", 130.0)],
                               scaling_table.parse_target("val_acc=0.9"))
    cells = [dict(zip(_columns("val_acc>=0.9"), _table_row(r, "val_acc>=0.9"), strict=True))
             for r in rows]
    assert cells[0]["MIN..MAX"] == "40..100 NOISY x2.5" and cells[0]["SAMPLES/S"] == "50"
    assert cells[1]["EFFICIENCY"] == "130 % IMPLAUSIBLE"
    assert cells[1]["TO val_acc>=0.9"] == "not reached"
    notes = _notes(rows)
    assert notes[0].startswith("1x1 is noisy: its epochs' samples/s differ by x2.5")
    assert notes[1].startswith("1x2: an efficiency of 130 % is implausible, not a result")
    assert "likely cause: load on the node" in notes[1]


def test_report_writes_json_and_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = scaling_table.parse_target("val_acc=0.4")
    rows = scaling_table.table([_result("1x1", "COMPLETED", 100.0),
                                _result("1x2", "COMPLETED", 190.0),
                                _result("1x4", "COMPLETED", 500.0),
                                _result("2x2", "TIMEOUT", None)], target)
    data = scaling_table.report("s1", "weak", rows, tmp_path / "study", target)
    png = Path(data["plot"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    saved = json.loads(RunDir(tmp_path / "study").scaling_report.read_text())
    assert saved["target"] == "val_acc>=0.4" and saved["runs"][0]["target_reached"] == 1
    assert [r["state"] for r in saved["runs"]] == ["COMPLETED"] * 3 + ["TIMEOUT"]
    # 125 % is shown apart, not as a point of the measured line.
    assert "hollow: efficiency above 110 %, not a result" in scaling_table.plot_notes(saved["runs"])
    assert "1x4 (125 %)" in scaling_table.plot_notes(saved["runs"])


def test_no_plot_without_a_measured_run(tmp_path: Path) -> None:
    rows = scaling_table.table([_result("1x1", "FAILED", None)])
    assert scaling_table.report("s2", "strong", rows, tmp_path)["plot"] is None


def test_studies_in_the_history(tmp_path: Path) -> None:
    history = History(tmp_path / "h.sqlite3")
    runs = [scaling_table.run_record(scaling_table.Topology(1, 2), 8, "12", "dev", "/r")]
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
        plan_runs("1x1,1x2", strong=False, batch_size=64,
                  trainer=TrainerCall(task="spiral", config=str(config)))
    with pytest.raises(ConfigError, match="trainer.no_such_field"):
        plan_runs("1x1", strong=False, batch_size=64,
                  trainer=TrainerCall(sets=("trainer.no_such_field=1",)))
    runs = plan_runs("1x1,1x2", strong=True, batch_size=64, trainer=TrainerCall(config=str(config)))
    assert [(t.label, b) for t, b in runs] == [("1x1", 64), ("1x2", 32)]
