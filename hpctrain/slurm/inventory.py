"""What a live cluster offers, parsed from SLURM's output (pure: no SLURM call here).

Text formats (`scontrol show ... -o`, `sacctmgr -P -n`, `scontrol show config`) read alike on
every SLURM version hpctrain meets; `sinfo --json` (21.08 on) gives the nodes without the
quoting pitfalls of the text form. tests/profiles/recorded/ holds real output of each.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from hpctrain.values.units import parse_time_seconds

# A key of scontrol's one-line output: a word directly followed by "=", at a word start.
_KEY = re.compile(r"(?:(?<=\s)|^)([A-Za-z][A-Za-z0-9_/:.]*)=")
_NONE = ("", "(null)", "N/A", "NONE", "none")


@dataclass(frozen=True)
class NodeInfo:
    """One node as slurmctld describes it."""

    name: str
    cpus: int
    mem_mb: int
    gpus: int
    gpu_type: str | None
    features: tuple[str, ...]
    partitions: tuple[str, ...]
    state: str = ""


@dataclass(frozen=True)
class PartitionInfo:
    """One partition's limits; None means unlimited (or not set)."""

    name: str
    default: bool
    max_time_s: int | None
    default_time_s: int | None
    max_nodes: int | None
    total_nodes: int
    allow_qos: tuple[str, ...] | None
    state: str = "UP"


@dataclass(frozen=True)
class QosInfo:
    """A QOS as sacctmgr shows it: its wall-time limit and other limits."""

    name: str
    max_wall_s: int | None
    limits: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Association:
    """A user's right to use an account (on one partition, or all when partition is None)."""

    account: str
    partition: str | None
    qos: tuple[str, ...]
    default_qos: str | None


def parse_oneliners(text: str) -> list[dict[str, str]]:
    """`scontrol -o show partition|node`: one record per line, `Key=value` pairs."""
    records = []
    for line in text.splitlines():
        if not line.strip():
            continue
        keys = list(_KEY.finditer(line))
        rec: dict[str, str] = {}
        for i, m in enumerate(keys):
            end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
            rec[m.group(1)] = line[m.end():end].strip()
        records.append(rec)
    return records


def parse_gres(text: str) -> tuple[int, str | None]:
    """GPUs in a node's Gres ("gpu:a100:4(S:0-1)", "gpu:2", "(null)"): (count, type)."""
    count, types = 0, []
    for item in re.split(r",(?![^()]*\))", text):
        parts = re.sub(r"\(.*?\)", "", item).strip().split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        n = parts[-1]
        count += int(n) if n.isdigit() else 0
        if len(parts) >= 3:
            types.append(parts[1])
    # Mixed GPU models on one node do not map to one type; the first stands for them.
    return count, (types[0] if types else None)


def _features(text: str) -> tuple[str, ...]:
    return () if text in _NONE else tuple(f for f in text.split(",") if f)


def _time(text: str) -> int | None:
    return None if text in _NONE or text.upper() in ("UNLIMITED", "INFINITE") else (
        parse_time_seconds(text))


def _count(text: str) -> int | None:
    return None if text in _NONE or text.upper() == "UNLIMITED" else int(text)


def _split(text: str) -> tuple[str, ...]:
    return tuple(x for x in text.split(",") if x)


def parse_nodes_text(text: str) -> list[NodeInfo]:
    """`scontrol -o show node`."""
    nodes = []
    for r in parse_oneliners(text):
        gpus, gpu_type = parse_gres(r.get("Gres", ""))
        cpus = r.get("CPUTot") or r.get("CPUs") or "0"
        nodes.append(NodeInfo(
            name=r["NodeName"], cpus=int(cpus), mem_mb=int(r.get("RealMemory", "0")),
            gpus=gpus, gpu_type=gpu_type, features=_features(r.get("AvailableFeatures", "")),
            partitions=_split(r.get("Partitions", "")), state=r.get("State", ""),
        ))
    return nodes


def _number(value: Any) -> int:
    # From 23.11 on, numbers come wrapped: {"set": true, "infinite": false, "number": 4}.
    if isinstance(value, dict):
        return int(value.get("number", 0))
    return int(value or 0)


def _joined(value: Any) -> str:
    return ",".join(value) if isinstance(value, list) else str(value or "")


def parse_nodes_json(text: str) -> list[NodeInfo] | None:
    """`sinfo --json` (or `scontrol show node --json`); None when it lists no `nodes`."""
    doc = json.loads(text)
    raw = doc.get("nodes") if isinstance(doc, dict) else None
    if not isinstance(raw, list):
        return None
    nodes = []
    for n in raw:
        gpus, gpu_type = parse_gres(_joined(n.get("gres", "")))
        state = n.get("state", "")
        nodes.append(NodeInfo(
            name=n["name"], cpus=_number(n.get("cpus")), mem_mb=_number(n.get("real_memory")),
            gpus=gpus, gpu_type=gpu_type, features=_features(_joined(n.get("features", ""))),
            partitions=tuple(n.get("partitions") or ()),
            state=_joined(state).upper(),
        ))
    return nodes


def parse_partitions_text(text: str) -> list[PartitionInfo]:
    """`scontrol -o show partition`."""
    parts = []
    for r in parse_oneliners(text):
        allow = r.get("AllowQos", "ALL")
        parts.append(PartitionInfo(
            name=r["PartitionName"], default=r.get("Default") == "YES",
            max_time_s=_time(r.get("MaxTime", "UNLIMITED")),
            default_time_s=_time(r.get("DefaultTime", "NONE")),
            max_nodes=_count(r.get("MaxNodes", "UNLIMITED")),
            total_nodes=int(r.get("TotalNodes", "0")),
            allow_qos=None if allow == "ALL" else _split(allow),
            state=r.get("State", "UP"),
        ))
    return parts


QOS_FORMAT = "Name,MaxWall,MaxTRESPerJob,MaxTRESPerUser,MaxJobsPerUser,MaxSubmitJobsPerUser,Flags"
ASSOC_FORMAT = "Account,Partition,QOS,DefaultQOS"


def parse_qos(text: str) -> list[QosInfo]:
    """`sacctmgr -P -n show qos format=QOS_FORMAT`."""
    names = QOS_FORMAT.split(",")
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        row = dict(zip(names, line.split("|"), strict=False))
        limits = {k: v for k, v in row.items() if k not in ("Name", "MaxWall") and v}
        out.append(QosInfo(row["Name"], _time(row.get("MaxWall", "")), limits))
    return out


def parse_associations(text: str) -> list[Association]:
    """`sacctmgr -P -n show assoc user=U format=ASSOC_FORMAT`."""
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        account, partition, qos, default_qos = (line.split("|") + ["", "", ""])[:4]
        out.append(Association(account, partition or None, _split(qos), default_qos or None))
    return out


def parse_config(text: str) -> dict[str, str]:
    """`scontrol show config`: `Key = value` lines."""
    conf = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and " " not in key.strip():
            conf[key.strip()] = value.strip()
    return conf
