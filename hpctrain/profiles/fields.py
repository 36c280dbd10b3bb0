"""What a profile's fields mean and how they are spelled, for the errors of a profile file."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Sequence
from typing import Any

from hpctrain.profiles.model import Profile

# The required fields, by their place with list indices left out: what to write there. A
# newcomer writing a profile from scratch learns them all from the first refusal.
MEANING = {
    "cluster": "cluster: the cluster's name as SLURM knows it (ClusterName in "
               "`scontrol show config`)",
    "partitions": "partitions: the partitions jobs may use",
    "partitions.name": "a partition's name: SLURM's name for it (sinfo's PARTITION)",
    "partitions.max_time": "max_time: the partition's wall-time limit, e.g. "
                           "`max_time: 1-00:00:00`",
    "partitions.max_nodes": "max_nodes: the most nodes one job may use, e.g. `max_nodes: 4` "
                            "(the partition's node count when the site publishes no limit)",
    "partitions.node_types.name": "a node type's name: the site's name for it (Gilbreth's K)",
    "partitions.node_types.gpus": "gpus: GPUs on one node of the type",
    "partitions.node_types.cpus": "cpus: CPUs on one node of the type",
    "partitions.node_types.mem_mb": "mem_mb: usable memory of one node of the type in MB "
                                    "(SLURM's RealMemory)",
    "partitions.constraints.name": "a constraint's name: the node feature --constraint selects",
    "qos.name": "a QOS's name as SLURM knows it (`sacctmgr show qos`)",
    "login.host": "login.host: the ssh destination, as you would type it after `ssh`",
}


def meaning(loc: Sequence[str | int]) -> str | None:
    """What the required field at `loc` (a pydantic error's location) holds, if known."""
    return MEANING.get(".".join(str(p) for p in loc if not isinstance(p, int)))


def known_fields(loc: Sequence[str | int]) -> list[str]:
    """The field names allowed in the mapping at `loc` of a profile ([] where unknown)."""
    cls: Any = Profile
    for part in loc:
        if isinstance(part, int):
            continue
        hints = typing.get_type_hints(cls)
        cls = _dataclass_in(hints.get(part))
        if cls is None:
            return []
    return [f.name for f in dataclasses.fields(cls)]


def _dataclass_in(annotation: Any) -> type | None:
    """The dataclass a field holds: itself, or inside `list[...]` or `... | None`."""
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return annotation
    for arg in typing.get_args(annotation):
        found = _dataclass_in(arg)
        if found is not None:
            return found
    return None


def missing_max_nodes(data: Any) -> list[tuple[str | int, ...]]:
    """The places of `max_nodes` that partitions of merged profile data lack.

    The model leaves it optional (for profiles built in code), so pydantic does not report it
    with the other missing fields; the loader adds these to them."""
    parts = data.get("partitions") if isinstance(data, dict) else None
    if not isinstance(parts, list):
        return []
    return [("partitions", i, "max_nodes") for i, p in enumerate(parts)
            if isinstance(p, dict) and "max_nodes" not in p]
