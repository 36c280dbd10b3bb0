"""A scaling study's values: its topologies and per-device batches, its --target, each run's
record; finished runs -> the table (speedup, efficiency, spread) and its plot."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpctrain.errors import ConfigError, HpctrainError
from hpctrain.slurm.states import JobState, parse_state
from hpctrain.values import rundir, units
from hpctrain.values.batching import split_batch
from hpctrain.values.rundir import RunDir
from hpctrain.values.units import Topology


def parse_topologies(text: str) -> list[Topology]:
    """`1x1,1x4,2x4` (NODESxGPUS per node) as topologies, smallest first; refuse the rest."""
    try:
        topos = units.parse_topologies(text)
    except ValueError as e:
        raise HpctrainError(f"--topologies {text!r}: {e}",
                            "write e.g. --topologies 1x1,1x4,2x4") from None
    return sorted(topos, key=lambda t: (t.gpus, t.nodes))


def per_device_batches(topologies: Sequence[Topology], strong: bool, batch: int
                       ) -> dict[Topology, int]:
    """Weak scaling: `batch` per GPU everywhere. Strong: `batch` global, split over each
    topology's GPUs by the one batch rule (batching.split_batch), without accumulation: a
    strong study measures the same optimizer step at every size."""
    if not strong:
        return {t: batch for t in topologies}
    try:
        # Every GPU count divides their least common multiple: its split is every topology's,
        # and its nearest valid batches are the ones that suit them all.
        split_batch(batch, math.lcm(*(t.gpus for t in topologies)), accumulation=1)
    except ConfigError as e:
        bad = [t.label for t in topologies if batch % t.gpus]
        raise ConfigError(
            f"--strong: the global batch {batch} does not divide over the GPUs of "
            f"{', '.join(bad)}", f"{e.fix} (--batch-size)") from None
    return {t: split_batch(batch, t.gpus, accumulation=1).per_device for t in topologies}


def read_json(read: Callable[[Path], bytes | None], run_dir: str | None, name: str
              ) -> dict[str, Any] | None:
    """A run directory's JSON file `name` as `read` finds it (here or at a login); None when
    it is missing or unreadable."""
    if not run_dir:
        return None
    try:
        data = json.loads(read(Path(run_dir) / name) or b"")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


# Epoch rates further apart than this factor: the topology's numbers are not one machine's.
NOISY_RATIO = 1.5
# Above this, an efficiency says more about the base run than about scaling.
IMPLAUSIBLE_EFFICIENCY = 1.1
# `METRIC=VALUE` means "at least" unless the metric's name says lower is better.
_LOWER_IS_BETTER = ("loss", "err", "perplexity", "mse", "mae")


@dataclass(frozen=True)
class Target:
    """A metric's value to reach: `val_acc>=0.9`, `val_loss<=0.2`."""

    metric: str
    op: str  # ">=" or "<="
    value: float

    @property
    def label(self) -> str:
        return f"{self.metric}{self.op}{self.value:g}"

    def met(self, value: float) -> bool:
        return value >= self.value if self.op == ">=" else value <= self.value


def parse_target(text: str) -> Target:
    """`METRIC>=VALUE`, `METRIC<=VALUE`, or `METRIC=VALUE` (<= for loss- or error-like names,
    >= otherwise); refuse the rest."""
    m = re.fullmatch(r"\s*([A-Za-z_][\w./-]*)\s*(>=|<=|=)\s*([-+0-9.eE]+)\s*", text)
    value = _float(m.group(3)) if m else None
    if m is None or value is None:
        raise HpctrainError(f"--target {text!r} is not METRIC=VALUE",
                            "write e.g. --target val_acc=0.9 or --target 'val_loss<=0.2'")
    metric, op = m.group(1), m.group(2)
    if op == "=":
        op = "<=" if any(w in metric.lower() for w in _LOWER_IS_BETTER) else ">="
    return Target(metric, op, value)


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class RunResult:
    """One run of a study as it ended: its record, SLURM state, metrics and monitor's mean."""

    run: dict[str, Any]
    state: str
    metrics: dict[str, Any] | None
    gpu_util_mean_pct: float | None = None


def _measured(r: RunResult) -> bool:
    """Only a run that completed has measurements to show; the rest are shown as they ended."""
    return parse_state(r.state) is JobState.COMPLETED


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _epochs(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in metrics.get("epochs") or [] if isinstance(e, dict)]


def epoch_rates(metrics: dict[str, Any]) -> list[float]:
    """Samples/s of each epoch after the first (the warm-up; with one epoch, that one), from
    metrics.json's `epochs`; without epochs, the file's overall samples_per_s."""
    epochs = _epochs(metrics)
    used = epochs[1:] if len(epochs) > 1 else epochs
    rates = []
    for e in used:
        samples, seconds = _num(e.get("samples")), _num(e.get("train_time_s"))
        if samples and seconds and samples > 0 and seconds > 0:
            rates.append(samples / seconds)
    overall = _num(metrics.get("samples_per_s"))
    return rates or ([overall] if not epochs and overall else [])


@dataclass(frozen=True)
class Spread:
    """A sample's median, its range and its quartiles."""

    median: float
    low: float
    high: float
    q1: float
    q3: float
    count: int

    @property
    def ratio(self) -> float:
        return self.high / self.low if self.low > 0 else math.inf


def spread(values: Sequence[float]) -> Spread | None:
    """Median, min..max and quartiles of `values` (None when there are none)."""
    if not values:
        return None
    ordered = sorted(values)
    q1, _q2, q3 = (statistics.quantiles(ordered, n=4, method="inclusive")
                   if len(ordered) > 1 else ordered * 3)
    return Spread(statistics.median(ordered), ordered[0], ordered[-1], q1, q3, len(ordered))


def is_noisy(s: Spread | None) -> bool:
    """Epoch rates that differ by more than NOISY_RATIO: something else ran on the node."""
    return s is not None and s.count > 1 and s.ratio > NOISY_RATIO


def time_to_target(metrics: dict[str, Any], target: Target) -> float | None:
    """Seconds from the trainer's start (its startup_s, then each epoch's time_s) to the end of
    the first epoch whose record meets `target`; None when no epoch did."""
    elapsed = _num(metrics.get("startup_s")) or 0.0
    for e in _epochs(metrics):
        elapsed += _num(e.get("time_s")) or 0.0
        logged = e.get("metrics")
        value = _num(logged.get(target.metric)) if isinstance(logged, dict) else None
        if value is not None and target.met(value):
            return elapsed
    return None


def _groups(results: Sequence[RunResult]) -> list[list[RunResult]]:
    """The runs by topology, in the order the topologies first appear, repeats in order."""
    groups: dict[str, list[RunResult]] = {}
    for r in results:
        groups.setdefault(str(r.run["topology"]), []).append(r)
    return [sorted(g, key=lambda r: int(r.run.get("repeat") or 1)) for g in groups.values()]


def _state(states: Sequence[str]) -> str:
    """One state when all repeats agree; else how many ended in each."""
    counts = Counter(states)
    return states[0] if len(counts) == 1 else ", ".join(f"{n} {s}" for s, n in counts.items())


def _repeat(r: RunResult, rates: list[float], target: Target | None) -> dict[str, Any]:
    """One repeat's own numbers, as the row's `repeats` list shows them."""
    measured = _measured(r)
    error = r.run.get("error") or (
        None if not measured else f"no {rundir.METRICS}" if r.metrics is None
        else None if rates else f"no measured epoch in {rundir.METRICS}")
    reached = time_to_target(r.metrics, target) if target and r.metrics and measured else None
    return {"repeat": int(r.run.get("repeat") or 1), "job_id": r.run.get("job_id"),
            "state": r.state, "run_dir": r.run.get("run_dir"),
            "time_s": _num((r.metrics or {}).get("wall_time_s")) if measured else None,
            "epoch_samples_per_s": [round(x, 1) for x in rates],
            "time_to_target_s": None if reached is None else round(reached, 2), "error": error}


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _row(group: Sequence[RunResult], target: Target | None) -> dict[str, Any]:
    run = group[0].run
    rates = [epoch_rates(r.metrics) if r.metrics and _measured(r) else [] for r in group]
    repeats = [_repeat(r, x, target) for r, x in zip(group, rates, strict=True)]
    s = spread([x for xs in rates for x in xs])
    gpus = int(run["gpus"])
    utils = [r.gpu_util_mean_pct for r in group if r.gpu_util_mean_pct is not None]
    reached = [p["time_to_target_s"] for p in repeats if p["time_to_target_s"] is not None]
    return {
        "topology": run["topology"], "nodes": run["nodes"],
        "gpus_per_node": run["gpus_per_node"], "gpus": gpus, "job_id": run.get("job_id"),
        "job_ids": [p["job_id"] for p in repeats], "state": _state([r.state for r in group]),
        "batch_per_device": run.get("batch_per_device"), "global_batch": run.get("global_batch"),
        "time_s": _median([p["time_s"] for p in repeats]),
        "samples_per_s": _round(s.median if s else None, 1),
        "samples_per_s_per_gpu": _round(s.median / gpus if s else None, 1),
        "samples_per_s_range": [round(s.low, 1), round(s.high, 1)] if s else None,
        "samples_per_s_iqr": [round(s.q1, 1), round(s.q3, 1)] if s else None,
        "epochs_measured": s.count if s else 0, "noisy": is_noisy(s),
        "rate_ratio": round(s.ratio, 2) if s else None,
        "speedup": None, "speedup_range": None, "efficiency": None, "implausible": None,
        "target": target.label if target else None,
        "time_to_target_s": _round(_median(reached), 2),
        "target_reached": len(reached) if target else None,
        "gpu_util_mean_pct": sum(utils) / len(utils) if utils else None,
        "run_dir": run.get("run_dir"),
        "error": next((p["error"] for p in repeats if p["error"]), None), "repeats": repeats,
    }


def implausible_cause(row: dict[str, Any], base: dict[str, Any]) -> str | None:
    """Why an efficiency above IMPLAUSIBLE_EFFICIENCY is not a scaling result (None when it is
    not above): the base run's load, a different batch per device, or a cache/warm-up effect."""
    if row["efficiency"] is None or row["efficiency"] <= IMPLAUSIBLE_EFFICIENCY:
        return None
    if base["noisy"]:
        low, high = base["samples_per_s_range"]
        return (f"load on the node: the base run {base['topology']} was noisy (its epochs ran "
                f"at {low:,.0f}..{high:,.0f} samples/s), so its median is too low")
    if row["batch_per_device"] != base["batch_per_device"]:
        return (f"a different per-device batch ({row['batch_per_device']} here, "
                f"{base['batch_per_device']} in {base['topology']}): a sample costs less "
                f"at another batch size (caches), not thanks to more GPUs")
    return (f"a cache or warm-up effect: {base['topology']} ran slower per GPU for another "
            f"reason than the GPU count (data out of a cache, a warm-up longer than one epoch)")


def _compare(row: dict[str, Any], base: dict[str, Any]) -> None:
    """Speedup and efficiency from the medians; the range from this row's min..max."""
    scale = base["samples_per_s"]
    speedup = row["samples_per_s"] / scale
    row["speedup"] = round(speedup, 3)
    row["speedup_range"] = [round(x / scale, 3) for x in row["samples_per_s_range"]]
    row["efficiency"] = round(speedup / (row["gpus"] / base["gpus"]), 3)
    row["implausible"] = implausible_cause(row, base)


def table(results: Sequence[RunResult], target: Target | None = None
          ) -> list[dict[str, Any]]:
    """One row per topology, its repeats pooled: the median samples/s over every measured epoch
    and its spread, speedup and efficiency against the measured topology with fewest GPUs."""
    rows = [_row(g, target) for g in _groups(results)]
    measured = [r for r in rows if r["samples_per_s"]]
    if not measured:
        return rows
    base = min(measured, key=lambda r: (r["gpus"], r["nodes"]))
    for r in measured:
        _compare(r, base)
    return rows


def plot_notes(rows: Sequence[dict[str, Any]]) -> str:
    """The plot title's lines on what is not a result."""
    failed = [f"{r['topology']}: {r['state']}" for r in rows if r["speedup"] is None]
    odd = [f"{r['topology']} ({100 * r['efficiency']:.0f} %)" for r in rows if r["implausible"]]
    return ((f"\nnot measured: {', '.join(failed)}" if failed else "")
            + (f"\nhollow: efficiency above {100 * IMPLAUSIBLE_EFFICIENCY:.0f} %, not a result "
               f"(see {rundir.SCALING_REPORT}): {', '.join(odd)}" if odd else ""))


def report(name: str, mode: str, rows: list[dict[str, Any]], directory: Path,
           target: Target | None = None) -> dict[str, Any]:
    """Write the table (scaling.json) and plot (scaling.png) into the study's directory."""
    from hpctrain.files.atomic import write_atomic

    directory.mkdir(parents=True, exist_ok=True)
    from hpctrain.studies import plot

    png = plot.scaling(rows, RunDir(directory).scaling_plot,
                       f"study {name} ({mode} scaling)" + plot_notes(rows))
    data = {"study": name, "mode": mode, "directory": str(directory),
            "plot": str(png) if png else None, "target": target.label if target else None,
            "runs": rows}
    write_atomic(RunDir(directory).scaling_report, json.dumps(data, indent=2) + "\n")
    return data


def run_record(topo: Topology, batch: int, job_id: str | None, cluster: str,
               run_dir: str | None, error: str | None = None, *, repeat: int = 1,
               target: Target | None = None) -> dict[str, Any]:
    """One run as the study stores it in the history (its topology's `repeat`-th, from 1; the
    study's --target rides along, as the study's record has no field of its own for it)."""
    return {**asdict(topo), "topology": topo.label, "gpus": topo.gpus, "batch_per_device": batch,
            "global_batch": batch * topo.gpus, "job_id": job_id, "cluster": cluster,
            "run_dir": run_dir, "error": error, "repeat": repeat,
            "target": target.label if target else None}


def recorded_target(runs: Sequence[dict[str, Any]]) -> Target | None:
    """The --target a study was started with, from its runs' records (None: none was)."""
    label = next((r["target"] for r in runs if r.get("target")), None)
    return parse_target(label) if label else None
