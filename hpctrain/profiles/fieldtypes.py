"""The types of a profile's fields and their checks: bounded counts, SLURM times, extra
sbatch options, names.

Each check hooks into pydantic only when it builds a schema, and the cache's strict
constructor (plain.py) runs the same checks without it; nothing here imports pydantic, so
that `hpctrain render` stays fast on a login node.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from hpctrain.slurm.sbatch_options import ASKS_FOR, more_options, parse_arg
from hpctrain.values.units import parse_time_seconds

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class Bounds:
    """An integer range check, `ge <= value (<= le)`, for pydantic and the cache alike."""

    def __init__(self, ge: int, le: int | None = None) -> None:
        self.ge = ge
        self.le = le

    def check(self, value: int) -> None:
        if value < self.ge or (self.le is not None and value > self.le):
            top = "" if self.le is None else f" and <= {self.le}"
            raise ValueError(f"{value} outside the range >= {self.ge}{top}")

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        # pydantic's own int schema carries the bounds, so its messages stay the usual
        # "Input should be greater than or equal to 1" without importing annotated_types.
        schema = handler(source)
        schema["ge"] = self.ge
        if self.le is not None:
            schema["le"] = self.le
        return schema


class SlurmTimeCheck:
    """A SLURM time string ("30", "1:00:00", "2-00:00:00"), for pydantic and the cache alike."""

    def check(self, value: str) -> None:
        parse_time_seconds(value)

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(_valid_time, handler(source))


def _valid_time(value: str) -> str:
    parse_time_seconds(value)
    return value


# What a profile says instead of an sbatch option that would contradict hpctrain's own line;
# VALUE is the option's value.
_PROFILE_FIELD = {
    "qos": "use default_qos: VALUE",
    "account": "use default_account: VALUE",
    "partition": "give partition VALUE `default: true`",
    "time": "give the partitions default_time: VALUE",
    "constraint": "give the partition default_constraint: VALUE",
    "gpus": "hpctrain asks for GPUs itself, as gpu_request says; drop it",
    "tasks": "tasks follow the GPUs and the job's --launcher; drop it",
    "cpus": "CPUs follow the GPUs' share of the node (shared_node); drop it",
    "memory": "memory follows the GPUs' share of the node (shared_node); drop it",
    "nodes": "each job chooses --nodes; drop it",
    "job name": "each job chooses --job-name; drop it",
    "logs": "logs go to output_dir, each job into its run directory; drop it",
    "dependency": "jobs wait for others with --after or --chain; drop it",
    "array": "`hpctrain sweep` makes job arrays; drop it",
    "restart": "requeue (allowed, grace_s) says how jobs outlive their limit; drop it",
    "cluster": "a profile is one cluster (`cluster:`); write a profile per cluster",
    "waiting": "hpctrain submits and watches jobs itself; drop it",
    "script": "drop it",
}


def sbatch_default_problem(arg: str) -> str | None:
    """Why `arg` cannot be one of a profile's sbatch_defaults (None: it can)."""
    if re.search(r"[\x00-\x1f\x7f]", arg):
        return f"{arg!r} contains a control character; remove it"
    if not arg.startswith("-") or arg in ("-", "--"):
        return f"{arg!r} is not an sbatch option; write one per entry, e.g. --threads-per-core=1"
    if more_options(arg):
        return f"{arg!r} holds several options; write one per entry"
    parsed = parse_arg(arg)
    topic = ASKS_FOR.get(parsed.name or "")
    if topic is not None:
        fix = _PROFILE_FIELD[topic].replace("VALUE", parsed.value or "NAME")
        return f"{arg} sets what hpctrain writes into every script; {fix}"
    if arg.startswith("--") and " " in arg.split("=", 1)[0]:
        return f"{arg!r}: write it as --option=value"
    return None


class SbatchDefaultCheck:
    """One extra #SBATCH option of a profile, for pydantic and the cache alike."""

    def check(self, value: str) -> None:
        problem = sbatch_default_problem(value)
        if problem:
            raise ValueError(problem)

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(_valid_default, handler(source))


def _valid_default(value: str) -> str:
    SbatchDefaultCheck().check(value)
    return value


# Far above any real node or cluster, low enough that no arithmetic on them overflows.
GpuCount = Annotated[int, Bounds(0, 1024)]
CpuCount = Annotated[int, Bounds(1, 1_000_000)]
MemMb = Annotated[int, Bounds(1, 1 << 40)]
NodeCount = Annotated[int, Bounds(1, 1_000_000)]
SlurmTime = Annotated[str, SlurmTimeCheck()]
SbatchDefault = Annotated[str, SbatchDefaultCheck()]


def check_name(kind: str, value: str) -> None:
    """Refuse a name that is not letters, digits, '_', '.' and '-' (first a letter or digit)."""
    if not _NAME.match(value):
        raise ValueError(f"{kind} name {value!r} must be letters, digits, '_', '.', '-'")
