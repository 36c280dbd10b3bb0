"""The monitor's pure parts: /proc parsers on the real /proc, GPU CSV, summaries and notes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hpctrain.monitor import gpu, host, stats
from hpctrain.monitor.sampler import Sampler, rows_path
from hpctrain.values.rundir import RunDir

RECORDED = Path(__file__).parent / "recorded"


def test_proc_stat_and_meminfo_parse_the_real_files() -> None:
    cpu = host.read_cpu()
    assert 0 < cpu.busy < cpu.total
    mem = host.read_memory()
    assert 0 < mem.used_mib < mem.total_mib
    later = host.read_cpu()
    pct = host.cpu_percent(cpu, later)
    assert pct is None or 0.0 <= pct <= 100.0


def test_cpu_percent_counts_idle_and_iowait_as_idle() -> None:
    before = host.parse_proc_stat("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 1 1 1 1 1 1 1\n")
    after = host.parse_proc_stat("cpu  200 0 200 800 100 0 0 0 50 0\n")
    # guest time (50) is already inside user: 200 busy of 300 ticks.
    assert before.busy == 200 and host.cpu_percent(before, after) == pytest.approx(200 / 3)
    assert host.cpu_percent(after, after) is None


def test_malformed_proc_files_raise_value_error() -> None:
    with pytest.raises(ValueError):
        host.parse_proc_stat("intr 1 2 3\n")
    with pytest.raises(ValueError):
        host.parse_meminfo("MemFree: 12 kB\n")
    assert host.parse_meminfo("MemTotal: 2048 kB\nMemFree: 1024 kB\n").used_mib == 1.0


def test_nvidia_smi_csv_columns_in_another_order() -> None:
    # The H100 recording's own lines with their columns reordered and no index column: the
    # parser goes by the header's names, and a line's position is its index.
    lines = [ln.split(", ") for ln in (RECORDED / "nvidia-smi-h100-busy.csv").read_text()
             .splitlines()]
    order = [4, 2, 1, 6]  # memory.total, utilization.gpu, name, temperature.gpu
    text = "".join(", ".join(cols[i] for i in order) + "\n" for cols in lines)
    (reading,) = gpu.parse_smi_csv(text)
    assert (reading.index, reading.name, reading.util_pct, reading.mem_total_mib,
            reading.temp_c) == (0, "NVIDIA H100 80GB HBM3", 10.0, 81559.0, 53.0)
    assert reading.mem_used_mib is None and reading.power_w is None
    assert gpu.parse_smi_csv("") == []
    assert gpu._number("[N/A]") is None and gpu._number("[Not Supported]") is None
    assert gpu._number("81.25 W") == 81.25


def test_nvidia_smi_csv_recorded_on_an_h100() -> None:
    idle, busy = (gpu.parse_smi_csv((RECORDED / f"nvidia-smi-h100-{s}.csv").read_text())
                  for s in ("idle", "busy"))
    assert idle == [gpu.GpuReading(0, "NVIDIA H100 80GB HBM3", 0.0, 0.0, 81559.0, 138.38, 53.0)]
    assert busy == [gpu.GpuReading(0, "NVIDIA H100 80GB HBM3", 10.0, 839.0, 81559.0, 138.3, 53.0)]


def test_recorded_h100_rows_summarize_with_nvml_readings(tmp_path: Path) -> None:
    (tmp_path / "monitor").mkdir()
    (tmp_path / "monitor" / "gpu-node.jsonl").write_text(
        (RECORDED / "h100-node.jsonl").read_text())
    summary = stats.job_summary(tmp_path)
    assert summary is not None
    node = summary["nodes"][0]
    assert node["gpu_source"] == "nvml" and node["cpus"] == 16 and node["samples"] == 32
    (g,) = node["gpus"]
    assert g["name"] == "NVIDIA H100 80GB HBM3" and g["mem_total_mib"] == 81559.0
    assert 0 < g["util_mean_pct"] < g["util_peak_pct"] <= 100 and g["energy_wh"] > 0
    # An eager small-model step leaves the H100 mostly idle: the note says so.
    assert any(n.startswith("GPU 0 on gpu-node idle") for n in summary["notes"])


def test_without_a_gpu_the_source_says_why() -> None:
    source, why = gpu.open_source()
    if source is not None:
        pytest.skip("this machine has a readable NVIDIA GPU")
    assert why.startswith("no NVIDIA GPU readable on this node: ")


def _gpu_rows(node: str, csv_names: list[str], span: float = 10.0) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = [{"kind": "start", "t": 0.0, "node": node, "cpus": 8,
                                      "gpu_source": "nvidia-smi"}]
    for i, name in enumerate(csv_names, start=1):
        readings = gpu.parse_smi_csv((RECORDED / name).read_text())
        rows.append({"kind": "sample", "t": i * span, "node": node, "span_s": span,
                     "cpu_pct": 20.0, "mem_used_mib": 1000.0, "mem_total_mib": 64000.0,
                     "gpus": [r.row() for r in readings], "self_cpu_s": 0.1 + 0.001 * i})
    return rows


def test_summary_of_recorded_gpu_readings_has_the_jobstats_notes() -> None:
    # The H100's readings (nvidia-smi-h100-*.csv): busy = 10 %, 839 of 81559 MiB, 138.3 W;
    # idle = 0 %, 0 MiB, 138.38 W.
    rows = _gpu_rows("gpu01", ["nvidia-smi-h100-busy.csv"] * 3)
    rows += _gpu_rows("gpu02", ["nvidia-smi-h100-idle.csv"] * 9 + ["nvidia-smi-h100-busy.csv"])
    summary = stats.summarize(stats.Rows(rows))
    by_node = {n["node"]: n for n in summary["nodes"]}
    (busy,) = by_node["gpu01"]["gpus"]
    assert (busy["util_mean_pct"], busy["util_peak_pct"], busy["mem_peak_mib"]) == (
        10.0, 10.0, 839.0)
    assert busy["power_mean_w"] == pytest.approx(138.3)
    (idle,) = by_node["gpu02"]["gpus"]
    assert idle["idle_pct"] == 90.0 and idle["util_peak_pct"] == 10.0
    notes = "\n".join(summary["notes"])
    assert "GPU 0 on gpu02 idle 90% of the time" in notes
    assert "GPU 0 on gpu01 busy only 10% on average" in notes and "batch size" in notes
    assert "GPU 0 on gpu01 used at most 839 of 81559 MiB: room for a larger batch" in notes
    assert summary["gpu_util_mean_pct"] == pytest.approx(round((10 + 1.0) / 2, 1))
    assert by_node["gpu01"]["monitor_cpu_pct"] == pytest.approx(0.01, abs=1e-3)


def test_busy_cpus_point_at_data_loading() -> None:
    rows = _gpu_rows("n1", ["nvidia-smi-h100-busy.csv"] * 2)
    for r in rows[1:]:
        r["cpu_pct"] = 97.0
    notes = "\n".join(stats.summarize(stats.Rows(rows))["notes"])
    assert "data loading" in notes and "num_workers" in notes


def test_recorded_devcluster_rows_of_a_killed_job(tmp_path: Path) -> None:
    (tmp_path / "monitor").mkdir()
    for name in ("node1", "node2"):
        text = (RECORDED / f"devcluster-{name}.jsonl").read_text()
        (tmp_path / "monitor" / f"{name}.jsonl").write_text(text + '{"kind":"sam')
    summary = stats.job_summary(tmp_path)
    assert summary is not None
    assert [n["node"] for n in summary["nodes"]] == ["node1", "node2"]
    assert all(n["samples"] == 2 and n["cpus"] == 2 for n in summary["nodes"])
    assert summary["gpu_util_mean_pct"] is None
    assert summary["notes"][0].startswith("node1, node2: no GPU readings (")
    assert any("2 unreadable line(s) skipped" in n for n in summary["notes"])
    assert stats.write_summary(tmp_path) == RunDir(tmp_path).monitor_summary
    assert stats.job_summary(tmp_path / "nothing") is None


def test_non_utf8_and_foreign_lines_are_skipped(tmp_path: Path) -> None:
    path = rows_path(tmp_path, "node 1;$(x)")
    assert path.name == "node_1_x.jsonl"
    path.parent.mkdir()
    path.write_bytes(b'\xff\xfe garbage\n[1, 2]\n{"kind": "sample", "node": "n", "t": 1}\n')
    rows = stats.read_rows(tmp_path)
    assert rows.bad_lines == 2 and len(rows.rows) == 1


def test_sampler_rows_from_the_real_proc(tmp_path: Path) -> None:
    out = (tmp_path / "rows.jsonl").open("a", encoding="utf-8")
    sampler = Sampler(out, "here", 0.05, None, "no GPU here")
    worker = threading.Thread(target=sampler.run)
    worker.start()
    try:
        # Three samples written, however slowly a loaded machine lets the thread run.
        _wait_for_lines(tmp_path / "rows.jsonl", '"kind":"sample"', 3, timeout_s=60)
    finally:
        sampler.stop()
        worker.join(60)
    assert not worker.is_alive(), "the sampler did not stop within 60 s of stop()"
    out.close()
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert rows[0]["kind"] == "start" and rows[0]["gpu_note"] == "no GPU here"
    assert rows[-1]["kind"] == "end" and rows[-1]["samples"] == len(rows) - 2 >= 3
    assert all(0 <= r["cpu_pct"] <= 100 and r["mem_used_mib"] > 0 for r in rows[1:-1])


def _wait_for_lines(path: Path, marker: str, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.is_file() or path.read_text().count(marker) < count:
        if time.monotonic() > deadline:
            text = path.read_text() if path.is_file() else "(no file)"
            raise AssertionError(f"{count} lines with {marker} not written within "
                                 f"{timeout_s} s; {path}: {text[-500:]}")
        time.sleep(0.02)


def _start_sampler(run_dir: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "hpctrain.monitor", "sample", "--run-dir", str(run_dir),
         "--interval", "0.1", "--node", "n1"])


def _wait_rows(path: Path, count: int) -> list[dict[str, object]]:
    _wait_for_lines(path, "\n", count, timeout_s=60)
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_usr2_ends_the_sampler_with_an_end_row(tmp_path: Path) -> None:
    proc = _start_sampler(tmp_path)
    _wait_rows(tmp_path / "monitor" / "n1.jsonl", 3)
    proc.send_signal(signal.SIGUSR2)
    assert proc.wait(10) == 0
    rows = _wait_rows(tmp_path / "monitor" / "n1.jsonl", 4)
    assert rows[-1]["kind"] == "end"


def test_a_killed_sampler_keeps_every_row_it_wrote(tmp_path: Path) -> None:
    proc = _start_sampler(tmp_path)
    _wait_rows(tmp_path / "monitor" / "n1.jsonl", 4)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    rows = stats.read_rows(tmp_path)
    assert rows.bad_lines == 0 and sum(r["kind"] == "sample" for r in rows.rows) >= 3


def test_a_job_that_ended_before_the_first_sample_says_so(tmp_path: Path) -> None:
    # The recorded start rows alone: the sampler started, the job ended within the interval.
    (tmp_path / "monitor").mkdir()
    for name in ("node1", "node2"):
        start = (RECORDED / f"devcluster-{name}.jsonl").read_text().splitlines()[0]
        (tmp_path / "monitor" / f"{name}.jsonl").write_text(start + "\n")
    summary = stats.job_summary(tmp_path)
    assert summary is not None and summary["samples"] == 0
    lines = stats.status_lines(summary)
    assert lines[:2] == [f"{node}: no sample yet (the monitor takes its first one an interval "
                         "after the job starts; a shorter job has none)"
                         for node in ("node1", "node2")]
    assert not any("None" in line or "were sampled" in line for line in lines)
