"""A sweep's results: each point's settings, metric, time and end, the best point, a plot.

The rows are made by pure functions from what the history and the run directories hold
(`point_row`, `choose_metric`, `best`); `Sweeps` gathers them (refreshing the points' states
first: the watcher's two SLURM calls however many points) and writes the report beside them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpctrain.errors import HpctrainError
from hpctrain.places import together
from hpctrain.studies import scaling_table
from hpctrain.values import rundir
from hpctrain.values.rundir import RunDir

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord, StudyRecord
    from hpctrain.places import Place

# metrics.json's top-level key of a metric's latest value: `final_<name>`.
FINAL_PREFIX = "final_"
# Metrics where more is better, by the words in their names; every other one is a loss.
_HIGHER = ("acc", "auc", "f1", "precision", "recall", "score", "iou", "map")


@dataclass(frozen=True)
class Metric:
    """The metric a sweep is ranked by, and whether more is better."""

    name: str
    mode: str  # "max" or "min"

    def better(self, a: float, b: float) -> bool:
        return a > b if self.mode == "max" else a < b


def choose_metric(given: str | None, files: Sequence[dict[str, Any] | None]) -> Metric | None:
    """`--metric NAME[:max|min]`, else the metric the trainer's best.ckpt followed, else the
    first one the points logged (a script of one's own, through progress.log_metrics)."""
    if given:
        name, _, mode = given.partition(":")
        if mode and mode not in ("max", "min"):
            raise HpctrainError(f"--metric {given!r}: the mode is max or min",
                                "write e.g. --metric val_acc:max")
        name = _epoch_name(name, files)
        return Metric(name, mode or _mode_of(name, files))
    for m in files:
        if m and m.get("best_val_metric"):
            return Metric(str(m["best_val_metric"]), str(m.get("best_val_mode") or "min"))
    names = logged(files)
    return Metric(names[0], _mode_of(names[0], files)) if names else None


def logged(files: Sequence[dict[str, Any] | None]) -> list[str]:
    """The metrics the points' epochs hold, in the order they first appear."""
    names: dict[str, None] = {}
    for m in files:
        for epoch in (m or {}).get("epochs") or []:
            if isinstance(epoch, dict) and isinstance(epoch.get("metrics"), dict):
                names.update(dict.fromkeys(epoch["metrics"]))
    return list(names)


def _epoch_name(name: str, files: Sequence[dict[str, Any] | None]) -> str:
    """`final_loss` (metrics.json's top-level key for the latest `loss`) is ranked by `loss`:
    the epochs hold `loss`, and FINAL is its latest value anyway."""
    names = logged(files)
    if name not in names and name.startswith(FINAL_PREFIX) and name[len(FINAL_PREFIX):] in names:
        return name[len(FINAL_PREFIX):]
    return name


def _mode_of(name: str, files: Sequence[dict[str, Any] | None]) -> str:
    for m in files:
        if m and m.get("best_val_metric") == name and m.get("best_val_mode"):
            return str(m["best_val_mode"])
    return "max" if any(word in name.lower() for word in _HIGHER) else "min"


def _values(metrics: dict[str, Any] | None, metric: Metric | None) -> list[float]:
    if not metrics or metric is None:
        return []
    out = []
    for epoch in metrics.get("epochs") or []:
        value = (epoch.get("metrics") or {}).get(metric.name) if isinstance(epoch, dict) else None
        if isinstance(value, int | float):
            out.append(float(value))
    return out


def point_row(index: int, settings: dict[str, str], record: JobRecord,
              metrics: dict[str, Any] | None, metric: Metric | None) -> dict[str, Any]:
    """One point of the table: its settings, the metric's final and best value, its time."""
    values = _values(metrics, metric)
    best_value = None
    for v in values:
        if best_value is None or (metric is not None and metric.better(v, best_value)):
            best_value = v
    wall = (metrics or {}).get("wall_time_s")
    return {
        "point": index, "job_id": record.job_id, "settings": settings, "state": record.state,
        "final": values[-1] if values else None, "best": best_value,
        "epochs": (metrics or {}).get("epochs_completed"),
        "time_s": round(float(wall), 1) if isinstance(wall, int | float) else None,
        "why": _why(record, metrics), "run_dir": record.run_dir,
    }


def _why(record: JobRecord, metrics: dict[str, Any] | None) -> str | None:
    """Why a point has no result: `hpctrain why`'s verdict, else how it ended (nothing for a
    point that completed: a command of the user's own may write no metrics.json)."""
    del metrics
    if record.state == "COMPLETED" or not record.terminal:
        return None
    if record.verdict:
        return record.verdict
    return f"exit {record.exit_code}" if record.exit_code else record.state.lower()


def best(rows: Sequence[dict[str, Any]], metric: Metric | None) -> dict[str, Any] | None:
    """The completed point with the best value of the metric (the first of equals)."""
    found = None
    for r in rows:
        if r["best"] is None or metric is None:
            continue
        if found is None or metric.better(r["best"], found["best"]):
            found = r
    return found


class Sweeps:
    """The sweeps in the history; their points are refreshed and read where they ran."""

    def __init__(self, history: History, local: Place) -> None:
        self.history = history
        self.local = local

    def find(self, name: str | None) -> StudyRecord:
        """The sweep by name or id (None: the last one)."""
        from hpctrain.tracking.selection import find_study

        return find_study(self.history, name, "sweep", "sweep",
                          "hpctrain sweep --profile P --grid optim.lr=0.1,0.03")

    def place(self, points: Sequence[JobRecord]) -> Place:
        from hpctrain import places

        return places.place_for(points[0], self.local) if points else self.local

    def refresh(self, study: StudyRecord) -> tuple[list[JobRecord], Place]:
        """The points with states fresh from SLURM (two calls at most, whatever their count)."""
        from hpctrain.tracking import byplace

        points = self.history.study_jobs(study.id or 0)
        place = self.place(points)
        if points and not all(r.terminal for r in points):
            points, _report = byplace.watcher(self.history, place,
                                              points[0].cluster).refresh(points)
        return points, place

    def report(self, study: StudyRecord, metric: str | None) -> dict[str, Any]:
        """The table, the best point, and (every point ended) the report and plot written."""
        from hpctrain.tracking.selection import latest_segments
        from hpctrain.tracking.why import verdicts

        points, place = self.refresh(study)
        points = latest_segments(verdicts(self.history, points, self.local))
        # Every point's metrics at once: over a login one round trip, not one a point.
        paths = [Path(study.directory, rundir.SWEEP_INFO),
                 *(Path(r.run_dir, rundir.METRICS) for r in points if r.run_dir)]
        with together.reading(place, paths) as read:
            info = scaling_table.read_json(read, study.directory, rundir.SWEEP_INFO) or {}
            data = report_data(study, points, info, read, metric)
        # Written once every point has ended, where the run directories are this machine's.
        if all(r.terminal for r in points) and place.run_dirs_on_this_disk:
            data.update(write_report(data, Path(study.directory), info.get("keys") or []))
        return data


def report_data(study: StudyRecord, points: Sequence[JobRecord], info: dict[str, Any],
                read: Callable[[Path], bytes | None], metric: str | None) -> dict[str, Any]:
    """The report as a value: rows in point order, the metric, the best point, the counts."""
    from hpctrain.tracking.selection import study_counts

    settings = info.get("points") or []
    files = [scaling_table.read_json(read, r.run_dir, rundir.METRICS) for r in points]
    chosen = choose_metric(metric, files)
    rows = []
    for r, m in zip(points, files, strict=True):
        index = _index(r)
        point = settings[index] if 0 <= index < len(settings) else {}
        rows.append(point_row(index, point, r, m, chosen))
    rows.sort(key=lambda row: row["point"])
    top = best(rows, chosen)
    return {"study": study.name, "directory": study.directory, "method": study.mode,
            "keys": info.get("keys") or [], "metric": chosen.name if chosen else None,
            "mode": chosen.mode if chosen else None, "logged_metrics": logged(files),
            "counts": study_counts(points),
            "best": top, "points": rows, "plot": None, "report": None}


def _index(record: JobRecord) -> int:
    try:
        return int(Path(record.run_dir or "").name)
    except ValueError:
        return -1


def write_report(data: dict[str, Any], directory: Path, keys: Sequence[str]) -> dict[str, Any]:
    """sweep-report.json and sweep.png in the sweep's run directory."""
    from hpctrain.files.atomic import write_atomic
    from hpctrain.studies import plot

    png = None
    if data["metric"]:
        png = plot.sweep(data["points"], keys, f"{data['metric']} (best, {data['mode']})",
                         RunDir(directory).sweep_plot, f"sweep {data['study']}")
    written = {"plot": str(png) if png else None,
               "report": str(RunDir(directory).sweep_report)}
    write_atomic(RunDir(directory).sweep_report, json.dumps({**data, **written}, indent=1)
                 + "\n")
    return written
