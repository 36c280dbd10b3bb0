"""metrics.json's typed model, its documentation, the epoch lines and the restarts bookkeeping:
the recorder's pure parts, without torch."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from hpctrain.trainer.recorder.lines import done_line, epoch_line, fmt, startup_line
from hpctrain.trainer.recorder.metrics_file import (
    SCHEMA_VERSION,
    MetricsFile,
    documented_keys,
    latest_metrics,
    overall_samples_per_s,
)
from hpctrain.trainer.recorder.segments import Segments
from hpctrain.trainer.records import (
    CompletedEnd,
    EpochRecord,
    Facts,
    OtherEnd,
    PartialEpoch,
    RestartRecord,
    StoppedEnd,
    UnrecordedEnd,
    end_from_json,
    end_to_json,
)
from hpctrain.trainer.restarts import run_history
from hpctrain.trainer.startup import FirstStepClock, Origin, StartupRecord

DOC = Path(__file__).resolve().parents[2] / "docs" / "trainer.md"

STOPPED = StoppedEnd(
    reason="SIGUSR1", epoch=2, mid_epoch=True, batches_done_in_epoch=5, global_step=18,
    requested_at=100.0, checkpoint_at=100.5, signal_to_checkpoint_s=0.5, decision_s=0.1,
    save_s=0.4, checkpoint="/r/last.ckpt",
)


def _epoch(n: int, metrics: dict[str, float | None], samples: int | None = 100) -> EpochRecord:
    return EpochRecord(epoch=n, metrics=metrics, samples=samples, learning_rate=0.1,
                       train_time_s=2.0, samples_per_s=None if samples is None else samples / 2,
                       time_s=2.5)


def _file(**overrides: Any) -> MetricsFile:
    values: dict[str, Any] = dict(
        hpctrain_version="0", task="spiral", status="running", world_size=1, num_nodes=1,
        devices_per_node=1, accelerator="cpu", epochs_completed=0, max_epochs=3,
        first_epoch=1, resumed_from=None, launch="local", slurm_job_id=None, run_dir="/r",
        wall_time_s=1.0,
    )
    return MetricsFile(**{**values, **overrides})


def _doc_tables() -> list[list[str]]:
    """The first-column keys of each table in docs/trainer.md's metrics.json section."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## metrics.json\n"):]
    section = section[:section.index("\n## ", 1)]
    tables: list[list[str]] = []
    for block in re.split(r"\n\s*\n", section):
        rows = [line for line in block.splitlines() if line.startswith("| `")]
        if rows:
            tables.append([k for row in rows for k in re.findall(r"`([^`]+)`", row.split("|")[1])])
    return tables


def test_the_doc_lists_exactly_the_models_keys() -> None:
    top, epoch, restart = _doc_tables()
    assert sorted(top) == sorted(documented_keys())
    assert sorted(epoch) == sorted(f.name for f in fields(EpochRecord))
    assert sorted(restart) == sorted(f.name for f in fields(RestartRecord))


def test_the_file_has_its_version_facts_finals_and_records() -> None:
    facts = Facts(batch_size_per_device=32, accumulate_grad_batches=1, batches_per_call=4,
                  data_on_device=True, cuda_graphs=None, effective_batch_size=32,
                  learning_rate=0.1, learning_rate_text="0.1", optimizers="SGD",
                  samples_counted_as="len(batch)")
    epochs = [_epoch(1, {"loss": 1.0, "val_acc": 0.5}), _epoch(2, {"loss": 0.5})]
    start = RestartRecord(start=1, started_at=1.0, slurm_job_id=None, slurm_restart_count=None,
                          resumed_from=None, previous_end=None, end=CompletedEnd(epochs=2))
    written = _file(epochs=epochs, restarts=[start], final=latest_metrics(epochs),
                    settings={"seed": 1}).with_facts(facts).with_startup(
                        StartupRecord(3.0, "process start", 2.0))
    data = json.loads(written.dumps())
    assert data["schema_version"] == SCHEMA_VERSION and data["settings"] == {"seed": 1}
    assert data["final_loss"] == 0.5 and data["final_val_acc"] == 0.5 and "final" not in data
    assert data["batches_per_call"] == 4 and "learning_rate_text" not in data
    assert data["startup_s"] == 3.0 and data["startup_imports_s"] == 2.0
    assert data["epochs"][1] == {"epoch": 2, "metrics": {"loss": 0.5}, "samples": 100,
                                 "learning_rate": 0.1, "train_time_s": 2.0,
                                 "samples_per_s": 50.0, "time_s": 2.5}
    assert data["restarts"][0]["end"] == {"how": "completed", "epochs": 2}
    # Every key the doc names is written (final_<name> once per logged name).
    assert set(documented_keys()) - {"final_<name>"} <= set(data)


def test_throughput_over_epochs_needs_every_batch_counted() -> None:
    assert overall_samples_per_s([_epoch(1, {}), _epoch(2, {})]) == 50.0
    assert overall_samples_per_s([_epoch(1, {}), _epoch(2, {}, samples=None)]) is None
    assert overall_samples_per_s([]) is None


@pytest.mark.parametrize(("value", "text"), [
    (None, "nan"), (0, "0.0000"), (0.98765, "0.9877"), (1.5e-5, "1.5000e-05"),
    (1743800.0, "1.7438e+06"),
])
def test_fmt(value: float | None, text: str) -> None:
    assert fmt(value) == text


def test_epoch_line_names_the_logged_metrics() -> None:
    record = _epoch(3, {"train_loss": 0.0564, "val_acc": None}, samples=3900)
    assert epoch_line(record, 20) == (
        "epoch 3/20 train_loss=0.0564 val_acc=nan samples/s=1950 time=2.50s"
    )
    assert epoch_line(_epoch(1, {}, samples=None), 2) == "epoch 1/2 samples/s=unknown time=2.50s"


def test_startup_and_done_lines() -> None:
    clock = FirstStepClock(Origin(10.0, "process start", 14.98))
    startup = clock.tick(15.1)
    assert startup is not None and clock.tick(16.0) is None and clock.record == startup
    assert startup_line(startup) == (
        "startup: first training step 5.10 s after the process start (imports 4.98 s)"
    )
    assert FirstStepClock(None).tick(1.0) is None
    done = _file(epochs_completed=20, best_val_metric="val_acc", final={"val_acc": 0.99971})
    where = "metrics in /r/metrics.json"
    assert done_line(done, Path("/r")) == f"done: 20 epoch(s), val_acc=0.9997, {where}"
    assert done_line(_file(epochs_completed=2), Path("/r")) == f"done: 2 epoch(s), {where}"


def test_ends_read_back_as_written() -> None:
    for end in (STOPPED, CompletedEnd(epochs=3), UnrecordedEnd()):
        raw = end_to_json(end)
        assert end_from_json(json.loads(json.dumps(raw))) == end
    # An end of a shape this version does not know is kept as it was.
    newer = {"how": "stopped", "reason": "SIGTERM", "node": "n1"}
    assert end_from_json(newer) == OtherEnd(newer) and end_to_json(OtherEnd(newer)) == newer
    assert end_from_json(None) is None


def _previous(tmp_path: Path, data: dict[str, Any]) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text(json.dumps(data))
    return run


def test_a_resumed_run_keeps_the_epochs_its_checkpoint_covers(tmp_path: Path) -> None:
    first = RestartRecord(1, 1.0, "7", 0, None, None, STOPPED).to_json()
    epochs = [_epoch(n, {"loss": 1.0 / n}).to_json() for n in (1, 2, 2, 3)]
    run = _previous(tmp_path, {"epochs": epochs, "restarts": [first]})
    header = {"epochs_finished": 2, "global_step": 18, "mid_epoch": True}
    env = {"SLURM_JOB_ID": "7", "SLURM_RESTART_COUNT": "1"}
    history = run_history(run / "metrics.json", "auto", run / "last.ckpt", header, env)
    assert [e.epoch for e in history.epochs] == [1, 2]
    earlier, this = history.restarts
    assert earlier.end == STOPPED and this.previous_end == STOPPED and this.end is None
    assert (this.start, this.slurm_job_id, this.slurm_restart_count) == (2, "7", 1)
    assert this.resumed_from is not None and this.resumed_from.epoch == 3
    assert this.to_json()["previous_end"] == first["end"]


def test_a_start_that_never_recorded_its_end_is_marked(tmp_path: Path) -> None:
    run = _previous(tmp_path, {"restarts": [RestartRecord(1, 1.0, None, None, None, None)
                                            .to_json()]})
    history = run_history(run / "metrics.json", "auto", None, None, {})
    assert history.epochs == [] and history.restarts[0].end == UnrecordedEnd()
    assert history.restarts[1].previous_end == UnrecordedEnd()
    # --resume never starts the record over.
    fresh = run_history(run / "metrics.json", "never", None, None, {})
    assert [r.start for r in fresh.restarts] == [1]


def test_segments_record_how_this_start_ended() -> None:
    start = RestartRecord(1, 1.0, None, None, None, None)
    segments = Segments([start])
    segments.failed(RuntimeError("boom"))
    failed = {"how": "failed", "error": "RuntimeError: boom"}
    assert end_to_json(segments.restarts[-1].end) == failed
    segments.stopped(STOPPED)
    assert segments.restarts[-1].end == STOPPED and start.end is None


def test_a_mid_epoch_state_reads_back_as_saved() -> None:
    saved = PartialEpoch(2, samples=640, uncounted=0, train_time_s=1.5, loss=(12.0, 640.0),
                         step_means={"lr_epoch": (0.64, 640.0)})
    assert PartialEpoch.from_state(saved.to_state()) == saved
    # A checkpoint of the earlier code: lists where tuples are, no uncounted batches.
    old = {"epoch": 2, "samples": 64, "train_time_s": 0.5, "loss": [3.0, 64.0],
           "step_means": {"x_epoch": [1.0, 64.0]}}
    assert PartialEpoch.from_state(old) == PartialEpoch(2, 64, 0, 0.5, (3.0, 64.0),
                                                        {"x_epoch": (1.0, 64.0)})
    assert PartialEpoch.from_state(None) is None


def test_the_pure_parts_load_without_torch() -> None:
    # Readers of metrics.json (and these tests) need neither torch nor Lightning.
    import subprocess
    import sys

    code = ("import sys, hpctrain.trainer.recorder.metrics_file, hpctrain.trainer.recorder.lines, "
            "hpctrain.trainer.recorder.segments, hpctrain.trainer.restarts; "
            "print(sorted({'torch', 'lightning'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
