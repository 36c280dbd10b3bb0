"""GPU readings: NVML through nvidia-ml-py, else `nvidia-smi --query-gpu` CSV, else "no GPU".

The one module of the monitor that runs a program (nvidia-smi); nvidia-ml-py is imported only
when a sampler starts, so that nothing else pays for it.
"""

from __future__ import annotations

import csv
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

SMI_FIELDS = ("index", "name", "utilization.gpu", "memory.used", "memory.total", "power.draw",
              "temperature.gpu")
SMI_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class GpuReading:
    """One GPU at one moment; None where the device does not report a value."""

    index: int
    name: str
    util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    power_w: float | None
    temp_c: float | None

    def row(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GpuSource:
    """Where readings come from: `read()` one reading per GPU; `name` nvml or nvidia-smi."""

    name: str
    read: Callable[[], list[GpuReading]]
    close: Callable[[], None]


def _number(text: str) -> float | None:
    """A CSV cell such as `95 %`, `745 MiB`, `81.25 W`, `[N/A]` or `[Not Supported]`."""
    value = text.strip().split(" ")[0] if text.strip() else ""
    try:
        return float(value)
    except ValueError:
        return None


def _column(header: str) -> str:
    """`memory.used [MiB]` -> `memory.used`."""
    return header.strip().split(" [")[0].strip()


def parse_smi_csv(text: str) -> list[GpuReading]:
    """`nvidia-smi --query-gpu=... --format=csv` output (header and units) as readings."""
    rows = list(csv.reader(line for line in text.splitlines() if line.strip()))
    if not rows:
        return []
    names = [_column(h) for h in rows[0]]
    out = []
    for position, cells in enumerate(rows[1:]):
        cell = dict(zip(names, (c.strip() for c in cells), strict=False))
        index = _number(cell.get("index", ""))
        mem_used, mem_total = _number(cell.get("memory.used", "")), _number(
            cell.get("memory.total", ""))
        out.append(GpuReading(
            index=int(index) if index is not None else position,
            name=cell.get("name", "") or "?",
            util_pct=_number(cell.get("utilization.gpu", "")),
            mem_used_mib=mem_used,
            mem_total_mib=mem_total,
            power_w=_number(cell.get("power.draw", "")),
            temp_c=_number(cell.get("temperature.gpu", "")),
        ))
    return out


def _smi_read(program: str) -> list[GpuReading]:
    done = subprocess.run(
        [program, f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv"],
        capture_output=True, text=True, timeout=SMI_TIMEOUT_S, check=True,
    )
    return parse_smi_csv(done.stdout)


def _nvml_value(call: Callable[..., Any], *args: Any, scale: float = 1.0) -> float | None:
    try:
        return round(float(call(*args)) * scale, 1)
    except Exception:  # NVMLError_NotSupported and friends: the device lacks that sensor
        return None


def _nvml_read(nvml: Any) -> list[GpuReading]:
    out = []
    for i in range(nvml.nvmlDeviceGetCount()):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        name = nvml.nvmlDeviceGetName(h)
        mem = nvml.nvmlDeviceGetMemoryInfo(h)
        out.append(GpuReading(
            index=i, name=name.decode() if isinstance(name, bytes) else str(name),
            util_pct=_nvml_value(lambda d: nvml.nvmlDeviceGetUtilizationRates(d).gpu, h),
            mem_used_mib=round(mem.used / 2**20, 1),
            mem_total_mib=round(mem.total / 2**20, 1),
            # NVML reports milliwatts.
            power_w=_nvml_value(nvml.nvmlDeviceGetPowerUsage, h, scale=1e-3),
            temp_c=_nvml_value(nvml.nvmlDeviceGetTemperature, h, nvml.NVML_TEMPERATURE_GPU),
        ))
    return out


def _nvml_source() -> tuple[GpuSource | None, str]:
    try:
        import pynvml as nvml  # nvidia-ml-py
    except ImportError:
        return None, "nvidia-ml-py is not installed"
    try:
        nvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return None, f"NVML did not start ({e})"
    if nvml.nvmlDeviceGetCount() == 0:
        nvml.nvmlShutdown()
        return None, "NVML sees no GPU"
    return GpuSource("nvml", lambda: _nvml_read(nvml), nvml.nvmlShutdown), ""


def _smi_source() -> tuple[GpuSource | None, str]:
    program = shutil.which("nvidia-smi")
    if program is None:
        return None, "no nvidia-smi on PATH"
    try:
        if not _smi_read(program):
            return None, "nvidia-smi lists no GPU"
    except (OSError, subprocess.SubprocessError) as e:
        return None, f"nvidia-smi failed ({type(e).__name__})"
    return GpuSource("nvidia-smi", lambda: _smi_read(program), lambda: None), ""


def open_source() -> tuple[GpuSource | None, str]:
    """NVML first, nvidia-smi second; None and the reasons when neither sees a GPU."""
    reasons = []
    for attempt in (_nvml_source, _smi_source):
        source, why = attempt()
        if source is not None:
            return source, ""
        reasons.append(why)
    return None, "no NVIDIA GPU readable on this node: " + "; ".join(reasons)
