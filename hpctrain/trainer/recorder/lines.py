"""The lines rank 0 prints for people and for grep: epoch lines, start-up, done (no torch)."""

from __future__ import annotations

from pathlib import Path

from hpctrain.trainer.recorder.metrics_file import MetricsFile
from hpctrain.trainer.records import UNKNOWN, EpochRecord
from hpctrain.trainer.startup import StartupRecord
from hpctrain.values.rundir import RunDir


def fmt(value: float | None) -> str:
    """A metric for the epoch line: 4 decimals, or 4 significant digits when tiny or huge."""
    if value is None:
        return "nan"
    if value == 0 or 1e-3 <= abs(value) < 1e6:
        return f"{value:.4f}"
    return f"{value:.4e}"


def epoch_line(record: EpochRecord, max_epochs: int | None) -> str:
    """One grep-able line per epoch: the logged metrics by their names, throughput, time."""
    sps = record.samples_per_s
    parts = [f"epoch {record.epoch}/{max_epochs}"]
    parts += [f"{name}={fmt(value)}" for name, value in record.metrics.items()]
    parts.append(f"samples/s={UNKNOWN if sps is None else f'{sps:.0f}'}")
    parts.append(f"time={record.time_s:.2f}s")
    return " ".join(parts)


def startup_line(startup: StartupRecord) -> str:
    """How long the run took to its first training step, and of that the imports."""
    imports = startup.startup_imports_s
    detail = f" (imports {imports:.2f} s)" if imports is not None else ""
    return (f"startup: first training step {startup.startup_s or 0.0:.2f} s after the "
            f"{startup.startup_from}{detail}")


def done_line(metrics: MetricsFile, run_dir: Path) -> str:
    """The end of a complete run, with the metric best.ckpt follows as its last epoch had it."""
    metric = metrics.best_val_metric
    shown = f"{metric}={fmt(metrics.final.get(metric))}, " if metric else ""
    return (f"done: {metrics.epochs_completed} epoch(s), {shown}metrics in "
            f"{RunDir(run_dir).metrics}")
