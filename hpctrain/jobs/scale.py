"""Scaling studies as values: topologies -> runs to submit; finished runs -> table and plot."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hpctrain import rundir, units
from hpctrain.errors import HpctrainError
from hpctrain.slurm.states import JobState, parse_state
from hpctrain.units import Topology


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
    """Weak scaling: `batch` per GPU everywhere. Strong: `batch` global, split over the GPUs."""
    if not strong:
        return {t: batch for t in topologies}
    bad = [t.label for t in topologies if batch % t.gpus]
    if bad:
        raise HpctrainError(
            f"--strong: the global batch {batch} does not divide over the GPUs of "
            f"{', '.join(bad)}",
            "choose a global --batch-size that every topology's GPU count divides",
        )
    return {t: batch // t.gpus for t in topologies}


@dataclass(frozen=True)
class Measured:
    """What a run's metrics.json says, warm-up left out."""

    samples_per_s: float | None
    time_s: float | None
    epochs_used: int


def measure(metrics: dict[str, Any]) -> Measured:
    """Training throughput over the epochs after the first (the warm-up) when there are more."""
    epochs = [e for e in metrics.get("epochs") or [] if isinstance(e, dict)]
    used = epochs[1:] if len(epochs) > 1 else epochs
    samples = sum(float(e.get("samples") or 0) for e in used)
    seconds = sum(float(e.get("train_time_s") or 0) for e in used)
    rate = samples / seconds if samples > 0 and seconds > 0 else None
    if rate is None and isinstance(metrics.get("samples_per_s"), int | float):
        rate = float(metrics["samples_per_s"])
    wall = metrics.get("wall_time_s")
    return Measured(rate, float(wall) if isinstance(wall, int | float) else None, len(used))


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


def _row(r: RunResult) -> dict[str, Any]:
    m = measure(r.metrics) if r.metrics and _measured(r) else None
    gpus = int(r.run["gpus"])
    rate = m.samples_per_s if m else None
    return {
        "topology": r.run["topology"], "nodes": r.run["nodes"],
        "gpus_per_node": r.run["gpus_per_node"], "gpus": gpus, "job_id": r.run.get("job_id"),
        "state": r.state, "batch_per_device": r.run.get("batch_per_device"),
        "global_batch": r.run.get("global_batch"), "time_s": m.time_s if m else None,
        "samples_per_s": None if rate is None else round(rate, 1),
        "samples_per_s_per_gpu": None if rate is None else round(rate / gpus, 1),
        "speedup": None, "efficiency": None, "gpu_util_mean_pct": r.gpu_util_mean_pct,
        "run_dir": r.run.get("run_dir"),
        "error": r.run.get("error") or (None if m or not _measured(r)
                                        else f"no {rundir.METRICS}"),
    }


def table(results: Sequence[RunResult]) -> list[dict[str, Any]]:
    """The tutorials' table: speedup and efficiency against the measured run with fewest GPUs."""
    rows = [_row(r) for r in results]
    measured = [r for r in rows if r["samples_per_s"]]
    if not measured:
        return rows
    base = min(measured, key=lambda r: (r["gpus"], r["nodes"]))
    for r in measured:
        speedup = r["samples_per_s"] / base["samples_per_s"]
        r["speedup"] = round(speedup, 3)
        r["efficiency"] = round(speedup / (r["gpus"] / base["gpus"]), 3)
    return rows


def plot(rows: Sequence[dict[str, Any]], path: Path, title: str) -> Path | None:
    """Speedup against GPUs with the ideal line, and efficiency; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    good = sorted((r for r in rows if r["speedup"] is not None), key=lambda r: r["gpus"])
    if not good:
        return None
    gpus = [r["gpus"] for r in good]
    base = gpus[0]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.2))
    ideal = sorted({base, *gpus})
    ax1.plot(ideal, [g / base for g in ideal], "--", color="grey", label="ideal")
    ax1.plot(gpus, [r["speedup"] for r in good], "o-", label="measured")
    ax2.axhline(100, linestyle="--", color="grey", label="ideal")
    ax2.plot(gpus, [100 * r["efficiency"] for r in good], "o-", color="C1", label="measured")
    for r in good:
        ax1.annotate(r["topology"], (r["gpus"], r["speedup"]), textcoords="offset points",
                     xytext=(4, -12), fontsize=8)
    for ax, label in ((ax1, "speedup (samples/s vs the first)"), (ax2, "efficiency (%)")):
        ax.set_xlabel("GPUs (nodes x GPUs per node)")
        ax.set_ylabel(label)
        ax.set_xticks(ideal)
        ax.margins(x=0.12)
        ax.grid(True, alpha=0.3)
        ax.legend()
    ax2.set_ylim(0, max(110, *(100 * r["efficiency"] + 10 for r in good)))
    failed = [f"{r['topology']}: {r['state']}" for r in rows if r["speedup"] is None]
    fig.suptitle(title + (f"\nnot measured: {', '.join(failed)}" if failed else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(name: str, mode: str, rows: list[dict[str, Any]], directory: Path
           ) -> dict[str, Any]:
    """Write the table (scaling.json) and plot (scaling.png) into the study's directory."""
    from hpctrain.files import write_atomic

    directory.mkdir(parents=True, exist_ok=True)
    png = plot(rows, directory / rundir.SCALING_PLOT, f"study {name} ({mode} scaling)")
    data = {"study": name, "mode": mode, "directory": str(directory),
            "plot": str(png) if png else None, "runs": rows}
    write_atomic(directory / rundir.SCALING_REPORT, json.dumps(data, indent=2) + "\n")
    return data


def run_record(topo: Topology, batch: int, job_id: str | None, cluster: str,
               run_dir: str | None, error: str | None = None) -> dict[str, Any]:
    """One run as the study stores it in the history."""
    return {**asdict(topo), "topology": topo.label, "gpus": topo.gpus, "batch_per_device": batch,
            "global_batch": batch * topo.gpus, "job_id": job_id, "cluster": cluster,
            "run_dir": run_dir, "error": error}
