"""The per-node sampler: one JSON line per sample, appended and flushed as it is taken."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import IO, Any

from hpctrain.monitor import host, stall
from hpctrain.monitor.gpu import GpuSource, open_source
from hpctrain.progress import node_name, safe_name
from hpctrain.values.rundir import RunDir

DEFAULT_INTERVAL_S = 10.0
# A last, partial interval shorter than this says nothing about utilization.
_MIN_FINAL_S = 0.5


def rows_path(run_dir: Path, node: str) -> Path:
    """`<run dir>/monitor/<node>.jsonl`; a node name is made safe as a file name."""
    return RunDir(run_dir).monitor_dir / f"{safe_name(node)}.jsonl"


class Sampler:
    """Samples this node every `interval_s` seconds into `out` until `stop()`."""

    def __init__(self, out: IO[str], node: str, interval_s: float,
                 gpus: GpuSource | None, gpu_note: str) -> None:
        self.out, self.node, self.interval_s = out, node, interval_s
        self.gpus, self.gpu_note = gpus, gpu_note
        self._stop = threading.Event()
        self.samples = 0

    def stop(self, *_: object) -> None:
        self._stop.set()

    @property
    def stopping(self) -> threading.Event:
        """Set when the sampler is asked to stop (the stall watch ends with it)."""
        return self._stop

    def _write(self, row: dict[str, Any]) -> None:
        # One write per line and a flush: a job killed at any moment keeps every whole row.
        self.out.write(json.dumps(row, separators=(",", ":")) + "\n")
        self.out.flush()

    def _gpu_fields(self) -> dict[str, Any]:
        if self.gpus is None:
            return {}
        try:
            return {"gpus": [g.row() for g in self.gpus.read()]}
        except Exception as e:  # a GPU that fell off the bus must not end the sampling
            return {"gpus": [], "gpu_error": f"{type(e).__name__}: {e}"[:300]}

    def start_row(self) -> dict[str, Any]:
        mem = host.read_memory()
        return {
            "kind": "start", "t": round(time.time(), 3), "node": self.node,
            "job_id": os.environ.get("SLURM_JOB_ID"), "interval_s": self.interval_s,
            "cpus": host.cpu_count(), "mem_total_mib": round(mem.total_mib, 1),
            "gpu_source": self.gpus.name if self.gpus else None,
            "gpu_note": self.gpu_note or None, "pid": os.getpid(),
        }

    def sample_row(self, before: host.CpuTimes, after: host.CpuTimes, span_s: float
                   ) -> dict[str, Any]:
        mem = host.read_memory()
        pct = host.cpu_percent(before, after)
        return {
            "kind": "sample", "t": round(time.time(), 3), "node": self.node,
            "span_s": round(span_s, 3), "cpu_pct": None if pct is None else round(pct, 1),
            "mem_used_mib": round(mem.used_mib, 1), "mem_total_mib": round(mem.total_mib, 1),
            **self._gpu_fields(), "self_cpu_s": round(host.own_cpu_seconds(), 4),
        }

    def run(self) -> None:
        """Sample until stopped; then one last partial sample and an `end` row."""
        began = time.monotonic()
        self._write(self.start_row())
        before, since = host.read_cpu(), began
        while not self._stop.wait(self.interval_s - (time.monotonic() - since)):
            after, now = host.read_cpu(), time.monotonic()
            self._write(self.sample_row(before, after, now - since))
            self.samples += 1
            before, since = after, now
        if time.monotonic() - since >= _MIN_FINAL_S:
            self._write(self.sample_row(before, host.read_cpu(), time.monotonic() - since))
            self.samples += 1
        self._write({
            "kind": "end", "t": round(time.time(), 3), "node": self.node,
            "samples": self.samples, "elapsed_s": round(time.monotonic() - began, 3),
            "self_cpu_s": round(host.own_cpu_seconds(), 4),
        })


def run_sampler(run_dir: Path, interval_s: float, node: str | None = None) -> Path:
    """Sample this node into the run directory until a stop signal; return the rows' file."""
    name = node or node_name()
    path = rows_path(run_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    gpus, note = open_source()
    watch = stall.from_environment(run_dir, name, time.time())
    try:
        with path.open("a", encoding="utf-8") as out:
            sampler = Sampler(out, name, interval_s, gpus, note)
            # USR2 is how the batch script asks (srun forwards it); TERM is SLURM's at the end.
            for sig in (signal.SIGUSR2, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, sampler.stop)
            if watch is not None:
                # A thread of the sampler's process: the watch costs no process of its own.
                threading.Thread(target=watch.run, args=(sampler.stopping,), daemon=True,
                                 name="stall-watch").start()
            sampler.run()
    finally:
        if gpus is not None:
            gpus.close()
    return path
