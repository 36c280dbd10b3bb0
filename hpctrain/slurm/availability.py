"""Where GPUs are free now: each partition's nodes and GPUs, busy and free, and its queue.

Pure: the text of one `sinfo` (a line per node and partition: its GPUs configured and in use,
its state) and one `squeue` (each waiting job's partitions) in, a row per partition and GPU
type out; with the cluster's reservations, the maintenance windows ahead and the partitions
whose nodes they take. The commands go in one round trip (`SlurmClient.availability`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hpctrain.slurm.reservations import Reservation, maintenance
from hpctrain.values.units import parse_time_seconds

SINFO_ARGV = ("sinfo", "--Node", "--noheader", "--Format",
              "NodeList:0|,Partition:0|,Gres:0|,GresUsed:0|,StateCompact:0")
SQUEUE_ARGV = ("squeue", "--noheader", "--states=PENDING", "--format", "%P")
# `gpu:a100:4(S:0-1)`, `gpu:4`, `gpu:emu:0(IDX:N/A)`: type (may be absent) and count.
_GPU = re.compile(r"^gpu(?::(?P<type>[^:(,]+))?:(?P<count>\d+)")
# States in which a node takes no new job: down, drained or draining, failing, not answering.
_OUT = ("down", "drain", "drng", "fail", "maint", "no_respond", "npc", "unk", "boot", "futr")


@dataclass(frozen=True)
class NodeGpus:
    """A node's GPUs as SLURM shows them: how many, how many in use, its state."""

    node: str
    partition: str
    gpu_type: str
    gpus: int
    used: int
    state: str

    @property
    def usable(self) -> bool:
        return not any(self.state.lower().rstrip("*~#!%$@^-").startswith(s) for s in _OUT)


@dataclass(frozen=True)
class PartitionGpus:
    """A partition's GPUs of one type, summed over its nodes."""

    partition: str
    gpu_type: str
    nodes: int
    usable_nodes: int
    idle_nodes: int  # usable, with every GPU free
    gpus: int
    used: int
    free: int  # on usable nodes
    waiting: int  # jobs pending in the partition (all GPU types)

    def as_dict(self) -> dict[str, object]:
        return {"partition": self.partition, "gpu_type": self.gpu_type, "nodes": self.nodes,
                "usable_nodes": self.usable_nodes, "idle_nodes": self.idle_nodes,
                "gpus": self.gpus, "gpus_used": self.used, "gpus_free": self.free,
                "jobs_waiting": self.waiting}


def _gpus(field: str) -> tuple[str, int]:
    """(type, count) of the GPUs in a GRES field (`gpu:a100:4(S:0-1),tmp:1`); ('', 0)."""
    for part in re.split(r",(?![^(]*\))", field):
        m = _GPU.match(part.strip())
        if m:
            return m.group("type") or "", int(m.group("count"))
    return "", 0


def parse_nodes(stdout: str) -> list[NodeGpus]:
    """SINFO_ARGV's lines: a node once per partition it is in."""
    found = []
    for line in stdout.splitlines():
        cols = line.strip().split("|")
        if len(cols) != 5 or not cols[0]:
            continue
        node, partition, gres, used, state = cols
        gpu_type, gpus = _gpus(gres)
        _, busy = _gpus(used)
        found.append(NodeGpus(node, partition.rstrip("*"), gpu_type, gpus, busy, state))
    return found


def parse_waiting(stdout: str) -> Counter[str]:
    """Jobs waiting per partition (a job that names several counts in each)."""
    return Counter(p for line in stdout.split() for p in line.split(",") if p)


def by_partition(nodes: Iterable[NodeGpus], waiting: Counter[str]) -> list[PartitionGpus]:
    """A row per partition and GPU type, in sinfo's order."""
    groups: dict[tuple[str, str], list[NodeGpus]] = {}
    for n in nodes:
        groups.setdefault((n.partition, n.gpu_type), []).append(n)
    return [_row(p, t, g, waiting[p]) for (p, t), g in groups.items()]


def _row(partition: str, gpu_type: str, nodes: Sequence[NodeGpus], waiting: int
         ) -> PartitionGpus:
    usable = [n for n in nodes if n.usable]
    return PartitionGpus(
        partition, gpu_type, len(nodes), len(usable),
        sum(1 for n in usable if n.used == 0 and not n.state.startswith(("alloc", "plnd"))),
        sum(n.gpus for n in nodes), sum(n.used for n in nodes),
        sum(max(n.gpus - n.used, 0) for n in usable), waiting)


def idle_for(rows: Iterable[PartitionGpus], partition: str, nodes: int) -> PartitionGpus | None:
    """The partition's row with `nodes` nodes idle now, if any: a request of that many nodes
    that SLURM still expects to start later waits for something other than busy nodes."""
    return next((r for r in rows if r.partition == partition and r.idle_nodes >= nodes), None)


@dataclass(frozen=True)
class Window:
    """A maintenance reservation that has not ended, and what it takes of each partition."""

    reservation: Reservation
    partitions: tuple[tuple[str, int, int], ...]  # (partition, its nodes taken, its nodes)

    def as_dict(self) -> dict[str, object]:
        r = self.reservation
        return {"name": r.name, "start": r.start, "end": r.end, "nodes": list(r.nodes),
                "partitions": [{"partition": p, "nodes_taken": taken, "nodes": of}
                               for p, taken, of in self.partitions]}


@dataclass(frozen=True)
class Availability:
    """The GPUs free now per partition, and the maintenance windows ahead."""

    partitions: list[PartitionGpus]
    windows: list[Window]  # maintenance not yet over, soonest first


def windows(nodes: Sequence[NodeGpus], found: Iterable[Reservation], now: float
            ) -> list[Window]:
    """The maintenance windows not yet over that take nodes of these partitions."""
    members: dict[str, set[str]] = {}
    for n in nodes:
        members.setdefault(n.partition, set()).add(n.node)
    ahead = sorted((r for r in maintenance(list(found)) if r.end > now), key=lambda r: r.start)
    shown = []
    for r in ahead:
        reserved = set(r.nodes)
        taken = tuple((p, len(names & reserved), len(names))
                      for p, names in members.items() if names & reserved)
        if taken:
            shown.append(Window(r, taken))
    return shown


MINE_ARGV = ("squeue", "--me", "--noheader", "--format", "%i|%T|%D|%b|%L|%l")
_PER_NODE_GPUS = re.compile(r"gpu(?::[^:,]+)?:(\d+)")


def held_gpu_hours(stdout: str) -> float:
    """The GPU-hours the user's queued and running jobs still hold (MINE_ARGV's lines): each
    job's nodes x GPUs per node x its time left (running) or its time limit (waiting)."""
    total = 0.0
    for line in stdout.splitlines():
        cols = line.strip().split("|")
        if len(cols) != 6:
            continue
        _, state, nodes, tres, left, limit = cols
        m = _PER_NODE_GPUS.search(tres)
        try:
            seconds = parse_time_seconds(left if state == "RUNNING" else limit)
        except ValueError:
            continue  # UNLIMITED, INVALID, NOT_SET: nothing to count
        if m and nodes.isdigit():
            total += int(nodes) * int(m.group(1)) * seconds / 3600
    return total
