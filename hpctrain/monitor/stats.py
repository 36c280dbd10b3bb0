"""Monitor rows -> per node and per GPU summaries and notes in the spirit of jobstats (pure)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

from hpctrain.values.rundir import RunDir

IDLE_UTIL_PCT = 5.0  # below this a GPU counts as idle in a sample
IDLE_SHARE_PCT = 50.0  # a GPU idle this share of the time gets a note
LOW_UTIL_PCT = 50.0
CPU_BOUND_PCT = 80.0
MEM_LOW_SHARE = 0.25
MEM_HIGH_SHARE = 0.95
COST_TARGET_PCT = 1.0


@dataclass
class GpuSummary:
    """One GPU's samples over a job, summed up."""

    node: str
    index: int
    name: str
    samples: int
    util_mean_pct: float | None
    util_peak_pct: float | None
    idle_pct: float | None
    mem_peak_mib: float | None
    mem_total_mib: float | None
    power_mean_w: float | None
    energy_wh: float | None
    temp_peak_c: float | None


@dataclass
class NodeSummary:
    """One node's CPU and memory samples over a job, summed up."""

    node: str
    samples: int
    seconds: float
    cpus: int | None
    cpu_mean_pct: float | None
    cpu_peak_pct: float | None
    mem_peak_mib: float | None
    mem_total_mib: float | None
    gpu_source: str | None
    gpu_note: str | None
    monitor_cpu_pct: float | None
    gpus: list[GpuSummary] = field(default_factory=list)


@dataclass
class Rows:
    """Rows read from a run directory, and how many lines could not be read."""

    rows: list[dict[str, Any]]
    bad_lines: int = 0
    files: int = 0


def read_rows(run_dir: Path) -> Rows:
    """Every row of `<run dir>/monitor/*.jsonl`; a torn last line or a bad one is counted."""
    out = Rows([])
    folder = RunDir(run_dir).monitor_dir
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        out.files += 1
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    out.bad_lines += 1
                    continue
                if isinstance(row, dict) and isinstance(row.get("node"), str):
                    out.rows.append(row)
                else:
                    out.bad_lines += 1
    return out


def _nums(values: Iterable[Any]) -> list[float]:
    return [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool)]


def _mean(values: list[float]) -> float | None:
    return round(fmean(values), 1) if values else None


def _peak(values: list[float]) -> float | None:
    return round(max(values), 1) if values else None


def _gpu_summary(node: str, index: int, readings: list[tuple[float, dict[str, Any]]]
                 ) -> GpuSummary:
    util = _nums(g.get("util_pct") for _, g in readings)
    power = [(span, float(g["power_w"])) for span, g in readings
             if isinstance(g.get("power_w"), int | float)]
    return GpuSummary(
        node=node, index=index, name=str(readings[-1][1].get("name", "?")),
        samples=len(readings), util_mean_pct=_mean(util), util_peak_pct=_peak(util),
        idle_pct=round(100 * sum(u < IDLE_UTIL_PCT for u in util) / len(util), 1)
        if util else None,
        mem_peak_mib=_peak(_nums(g.get("mem_used_mib") for _, g in readings)),
        mem_total_mib=_peak(_nums(g.get("mem_total_mib") for _, g in readings)),
        power_mean_w=_mean([p for _, p in power]),
        energy_wh=round(sum(s * p for s, p in power) / 3600, 3) if power else None,
        temp_peak_c=_peak(_nums(g.get("temp_c") for _, g in readings)),
    )


def _gpus(node: str, samples: list[dict[str, Any]]) -> list[GpuSummary]:
    by_index: dict[int, list[tuple[float, dict[str, Any]]]] = {}
    for row in samples:
        span = float(row.get("span_s") or 0)
        for g in row.get("gpus") or []:
            if isinstance(g, dict) and isinstance(g.get("index"), int):
                by_index.setdefault(g["index"], []).append((span, g))
    return [_gpu_summary(node, i, by_index[i]) for i in sorted(by_index)]


def _cost(rows: list[dict[str, Any]]) -> float | None:
    """The sampler's steady CPU use as a percentage of one core (its start-up left out)."""
    timed = [r for r in rows if isinstance(r.get("self_cpu_s"), int | float)
             and isinstance(r.get("t"), int | float)]
    if len(timed) < 2:
        return None
    first, last = timed[0], timed[-1]
    span = float(last["t"]) - float(first["t"])
    used = float(last["self_cpu_s"]) - float(first["self_cpu_s"])
    return round(100 * used / span, 3) if span > 0 else None


def summarize_node(node: str, rows: list[dict[str, Any]]) -> NodeSummary:
    """One node's rows (any order) as its summary."""
    rows = sorted(rows, key=lambda r: float(r.get("t") or 0))
    starts = [r for r in rows if r.get("kind") == "start"]
    start = starts[-1] if starts else {}
    samples = [r for r in rows if r.get("kind") == "sample"]
    cpu = _nums(r.get("cpu_pct") for r in samples)
    mem_total = _nums(r.get("mem_total_mib") for r in samples)
    return NodeSummary(
        node=node, samples=len(samples),
        seconds=round(sum(_nums(r.get("span_s") for r in samples)), 1),
        cpus=start.get("cpus"), cpu_mean_pct=_mean(cpu), cpu_peak_pct=_peak(cpu),
        mem_peak_mib=_peak(_nums(r.get("mem_used_mib") for r in samples)),
        mem_total_mib=_peak(mem_total), gpu_source=start.get("gpu_source"),
        gpu_note=start.get("gpu_note"),
        # The last start's process only: a requeued job appends a new sampler's rows.
        monitor_cpu_pct=_cost(rows[rows.index(start) + 1:] if starts else rows),
        gpus=_gpus(node, samples),
    )


def _gpu_notes(g: GpuSummary, cpu_mean: float | None) -> list[str]:
    where = f"GPU {g.index} on {g.node}"
    notes = []
    if g.idle_pct is not None and g.idle_pct >= IDLE_SHARE_PCT:
        notes.append(f"{where} idle {g.idle_pct:.0f}% of the time: check that the training "
                     "uses every GPU it asked for (one task per GPU), or ask for fewer GPUs")
    elif g.util_mean_pct is not None and g.util_mean_pct < LOW_UTIL_PCT:
        if cpu_mean is not None and cpu_mean >= CPU_BOUND_PCT:
            why = (f"the node's CPUs are {cpu_mean:.0f}% busy, so data loading likely starves "
                   "it: raise data.num_workers and --cpus-per-task, or preprocess the data")
        else:
            why = ("the CPUs are not the limit, so the steps are likely too small: raise the "
                   "batch size (--batch-size) or look for waits on I/O and communication")
        notes.append(f"{where} busy only {g.util_mean_pct:.0f}% on average: {why}")
    if g.mem_peak_mib is not None and g.mem_total_mib:
        share = g.mem_peak_mib / g.mem_total_mib
        if share >= MEM_HIGH_SHARE:
            notes.append(f"{where} peaked at {g.mem_peak_mib:.0f} of {g.mem_total_mib:.0f} MiB: "
                         "close to out of memory; lower the batch size if runs fail")
        elif share <= MEM_LOW_SHARE:
            notes.append(f"{where} used at most {g.mem_peak_mib:.0f} of {g.mem_total_mib:.0f} "
                         "MiB: room for a larger batch")
    return notes


def _node_notes(n: NodeSummary) -> list[str]:
    notes = []
    if n.mem_peak_mib is not None and n.mem_total_mib and \
            n.mem_peak_mib / n.mem_total_mib >= MEM_HIGH_SHARE:
        notes.append(f"{n.node}: memory peaked at {n.mem_peak_mib:.0f} of "
                     f"{n.mem_total_mib:.0f} MiB: close to the node's limit")
    if n.monitor_cpu_pct is not None and n.monitor_cpu_pct > COST_TARGET_PCT:
        notes.append(f"{n.node}: the monitor used {n.monitor_cpu_pct:.2f}% of one core; "
                     "a longer --monitor-interval costs less")
    for g in n.gpus:
        notes.extend(_gpu_notes(g, n.cpu_mean_pct))
    return notes


def summarize(rows: Rows) -> dict[str, Any]:
    """The whole job: per node (with its GPUs), the mean GPU utilization, and notes."""
    by_node: dict[str, list[dict[str, Any]]] = {}
    for row in rows.rows:
        by_node.setdefault(row["node"], []).append(row)
    nodes = [summarize_node(name, by_node[name]) for name in sorted(by_node)]
    by_name = {n.node: n for n in nodes}
    util = _nums(g.util_mean_pct for n in nodes for g in n.gpus)
    without: dict[str, list[str]] = {}
    for n in nodes:
        if not n.gpus:
            without.setdefault(n.gpu_note or "no GPU reported", []).append(n.node)
    notes = [f"{', '.join(names)}: no GPU readings ({why})"
             + ("; CPU and memory were sampled" if any(by_name[m].samples for m in names) else "")
             for why, names in without.items()]
    notes += [note for n in nodes for note in _node_notes(n)]
    if rows.bad_lines:
        notes.append(f"{rows.bad_lines} unreadable line(s) skipped (a torn last write is normal "
                     "for a killed job)")
    return {
        "nodes": [asdict(n) for n in nodes],
        "samples": sum(n.samples for n in nodes),
        "gpu_util_mean_pct": _mean(util),
        "energy_wh": round(sum(_nums(g.energy_wh for n in nodes for g in n.gpus)), 3)
        if any(g.energy_wh is not None for n in nodes for g in n.gpus) else None,
        "notes": notes,
    }


def job_summary(run_dir: Path) -> dict[str, Any] | None:
    """The summary of a run directory's monitor rows; None when it has none."""
    rows = read_rows(run_dir)
    if not rows.files:
        return None
    return {"run_dir": str(run_dir), **summarize(rows)}


def _rank_nodes(run_dir: Path) -> dict[str, str]:
    """rank -> node, from the ranks the rank hook registered."""
    from hpctrain.monitor.ranks import registered_ranks

    return {str(r.rank): r.node for r in registered_ranks(run_dir, 0.0)}


def write_summary(run_dir: Path) -> Path | None:
    """Write `monitor-summary.json` beside the trainer's metrics.json (None: no rows)."""
    from hpctrain.files.atomic import write_atomic

    summary = job_summary(run_dir)
    if summary is None:
        return None
    # Which node each rank ran on (the rank hook's registry): `why` names a rank's node so.
    summary["ranks"] = _rank_nodes(run_dir)
    path = RunDir(run_dir).monitor_summary
    write_atomic(path, json.dumps(summary, indent=2) + "\n")
    return path


def status_lines(summary: dict[str, Any]) -> list[str]:
    """The summary in a few lines, as `hpctrain status JOB` shows it under the job."""
    lines = []
    for n in summary["nodes"]:
        if not n["samples"]:
            # The sampler started but the job ended within its first interval.
            lines.append(f"{n['node']}: no sample yet (the monitor takes its first one "
                         "an interval after the job starts; a shorter job has none)")
            continue
        gpus = n["gpus"]
        gpu_text = (", GPUs " + " ".join(
            f"{g['index']}:{g['util_mean_pct'] if g['util_mean_pct'] is not None else '-'}%"
            for g in gpus) + " mean util") if gpus else ", no GPU readings"
        lines.append(f"{n['node']}: {n['samples']} sample(s), CPU mean {n['cpu_mean_pct']}% "
                     f"peak {n['cpu_peak_pct']}%, memory peak {n['mem_peak_mib']} MiB"
                     f"{gpu_text}")
    return lines + [f"note: {note}" for note in summary["notes"]]
