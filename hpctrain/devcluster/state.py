"""What the dev cluster records about itself (state.json) and reports (Status, UpResult)."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hpctrain.devcluster.layout import Layout
from hpctrain.devcluster.topology import CLUSTER_NAME, ClusterPlan


@dataclass
class DaemonStatus:
    """One daemon: its pid (from the pid file) and whether that pid is verifiably ours."""

    name: str
    pid: int | None
    alive: bool


@dataclass
class Status:
    """What `hpctrain devcluster status` shows."""

    running: bool
    healthy: bool
    directory: str
    slurm_conf: str
    profile: str | None
    nodes_per_partition: int | None
    node_names: list[str]
    daemons: list[DaemonStatus]
    sinfo: str | None = None
    state: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain data for --json."""
        return asdict(self)


@dataclass
class UpResult:
    """What `up` did: the emulated profile, its nodes, the daemons' pids, how long it took."""

    already_running: bool
    profile: str
    nodes_per_partition: int
    node_names: list[str]
    slurm_conf: Path
    seconds: float
    pids: dict[str, int]
    # The daemons this `up` started; a repair starts only the dead ones.
    started: list[str] = field(default_factory=list)
    # What ran before a --replace restarted it for this plan: its profile and nodes per
    # partition (None: nothing else ran, or it was this very plan).
    replaced: dict[str, Any] | None = None

    @property
    def repaired(self) -> bool:
        """Some daemons were started and others kept running, for the same plan."""
        return (self.replaced is None and bool(self.started)
                and set(self.started) != set(self.pids))

    def as_dict(self) -> dict[str, Any]:
        """Plain data for --json (seconds rounded to a tenth)."""
        return {**asdict(self), "slurm_conf": str(self.slurm_conf),
                "seconds": round(self.seconds, 1)}

    @property
    def export_line(self) -> str:
        """The line that points raw SLURM commands at this cluster."""
        return export_line(self.slurm_conf)


def export_line(slurm_conf: Path | str) -> str:
    """The shell line that sets SLURM_CONF, quoted for any path."""
    return f"export SLURM_CONF={shlex.quote(str(slurm_conf))}"


def read_state(layout: Layout) -> dict[str, Any]:
    """state.json's content; empty if it is missing or unreadable."""
    try:
        data = json.loads(layout.state_file.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_state(layout: Layout, data: dict[str, Any]) -> None:
    """Replace state.json atomically."""
    tmp = layout.state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(layout.state_file)


def state_dict(plan: ClusterPlan, layout: Layout, phase: str,
               pids: dict[str, int] | None = None, started_at: str | None = None
               ) -> dict[str, Any]:
    """state.json for a cluster running (or starting) this plan."""
    return {
        "phase": phase,
        "profile": plan.profile,
        "nodes_per_partition": plan.nodes_per_group,
        "cluster_name": CLUSTER_NAME,
        "node_names": plan.node_names,
        "groups": [
            {"prefix": g.prefix, "partitions": list(g.partitions), "nodes": list(g.nodes),
             "cpus": g.cpus, "mem_mb": g.mem_mb, "gres": g.gres, "features": list(g.features)}
            for g in plan.groups
        ],
        "ports": {**plan.ports.as_dict(), "slurmd": plan.node_ports()},
        "pids": pids or {},
        "slurm_conf": str(layout.slurm_conf),
        "socket_dir": str(layout.socket_dir),
        "started_at": started_at or datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def known_nodes(layout: Layout) -> list[str]:
    """Nodes named in the state file plus any slurmd pid file (a crashed up may leave some)."""
    names = list(read_state(layout).get("node_names") or [])
    if layout.run.is_dir():
        for f in sorted(layout.run.glob("slurmd-*.pid")):
            node = f.name[len("slurmd-"):-len(".pid")]
            if node not in names:
                names.append(node)
    return names


def publish(pointer: Path, slurm_conf: Path) -> None:
    """Name our slurm.conf in the pointer file that hpctrain's SLURM client reads."""
    tmp = pointer.with_name(pointer.name + ".tmp")
    tmp.write_text(f"{slurm_conf}\n")
    tmp.replace(pointer)


def withdraw(pointer: Path, slurm_conf: Path) -> None:
    """Remove the pointer file if it names our slurm.conf (another cluster's stays)."""
    try:
        if pointer.read_text().strip() == str(slurm_conf):
            pointer.unlink()
    except OSError:
        pass
