"""Cluster profiles as pydantic models; YAML files are validated against these."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hpctrain.units import parse_time_seconds

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Constraint(_Strict):
    """A node feature users may select with --constraint on a partition."""

    name: str
    description: str = ""
    # Raven's gpu-bw nodes: only 32 exist, so jobs on them are capped lower than the partition.
    max_nodes: int | None = Field(default=None, ge=1)


class Partition(_Strict):
    name: str
    description: str = ""
    gpu_type: str | None = None
    gpus_per_node: int = Field(ge=0)
    cpus_per_node: int = Field(ge=1)
    mem_per_node_mb: int = Field(ge=1)
    max_time: str
    default_time: str | None = None
    max_nodes: int | None = Field(default=None, ge=1)
    # GPU counts a job may take on one node (Raven: 1, 2 or 4); None means 1..gpus_per_node.
    allowed_gpus_per_node: list[int] | None = None
    # Multi-node jobs must take whole nodes (Raven's rule: 4 GPUs per node).
    multinode_full_nodes: bool = False
    required_qos: str | None = None
    # Always emitted (Raven's --constraint=gpu); a user --constraint picks among `constraints`.
    default_constraint: str | None = None
    constraints: list[Constraint] = Field(default_factory=list)
    default: bool = False
    # The cluster's default partition, selected without --partition (Raven production scripts).
    implicit: bool = False

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"partition name {v!r} must be letters, digits, '_', '.', '-'")
        return v

    @field_validator("max_time", "default_time")
    @classmethod
    def _time_ok(cls, v: str | None) -> str | None:
        if v is not None:
            parse_time_seconds(v)
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Partition:
        if self.allowed_gpus_per_node is not None:
            bad = [g for g in self.allowed_gpus_per_node if not 1 <= g <= self.gpus_per_node]
            if bad:
                raise ValueError(
                    f"allowed_gpus_per_node {bad} outside 1..{self.gpus_per_node} (gpus_per_node)"
                )
        if self.default_time is not None and parse_time_seconds(
            self.default_time
        ) > parse_time_seconds(self.max_time):
            raise ValueError(f"default_time {self.default_time} exceeds max_time {self.max_time}")
        return self

    @property
    def max_seconds(self) -> int:
        return parse_time_seconds(self.max_time)

    def constraint(self, name: str) -> Constraint | None:
        return next((c for c in self.constraints if c.name == name), None)


class Qos(_Strict):
    name: str
    description: str = ""
    max_time: str | None = None

    @field_validator("max_time")
    @classmethod
    def _time_ok(cls, v: str | None) -> str | None:
        if v is not None:
            parse_time_seconds(v)
        return v


class SharedNode(_Strict):
    """How CPUs and memory follow the GPUs on a node shared with other jobs."""

    # per_gpu: fixed CPUs and memory per GPU (Raven: 18 and 125000 MB).
    # proportional: the node's CPUs and memory split by the share of GPUs (Marvin, Gilbreth).
    mode: Literal["per_gpu", "proportional"] = "proportional"
    cpus_per_gpu: int | None = Field(default=None, ge=1)
    mem_per_gpu_mb: int | None = Field(default=None, ge=1)
    # Refuse requests above the share instead of only defaulting to it (Raven enforces its split).
    strict: bool = False

    @model_validator(mode="after")
    def _per_gpu_values(self) -> SharedNode:
        if self.mode == "per_gpu" and (self.cpus_per_gpu is None or self.mem_per_gpu_mb is None):
            raise ValueError("mode per_gpu needs cpus_per_gpu and mem_per_gpu_mb")
        return self


class Environment(_Strict):
    modules: list[str] = Field(default_factory=list)
    module_use: list[str] = Field(default_factory=list)
    # Modules to purge first? Some sites (Marvin) need a module tree swapped before loads.
    purge: bool = False
    # auto: activate the Python environment hpctrain runs from; none: activate nothing;
    # anything else: a path to a venv or conda prefix to activate.
    python: str = "auto"
    # Extra shell lines the site needs before launch, rendered verbatim (profile authors only).
    setup: list[str] = Field(default_factory=list)


class Nccl(_Strict):
    """NCCL defaults; every value is optional because most sites publish none."""

    socket_ifname: str | None = None
    ib_hca: str | None = None
    ib_disable: bool | None = None
    net_gdr_level: int | None = Field(default=None, ge=0, le=5)
    debug: Literal["VERSION", "WARN", "INFO", "TRACE"] | None = None
    extra: dict[str, str] = Field(default_factory=dict)

    def variables(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.socket_ifname is not None:
            out["NCCL_SOCKET_IFNAME"] = self.socket_ifname
        if self.ib_hca is not None:
            out["NCCL_IB_HCA"] = self.ib_hca
        if self.ib_disable is not None:
            out["NCCL_IB_DISABLE"] = "1" if self.ib_disable else "0"
        if self.net_gdr_level is not None:
            out["NCCL_NET_GDR_LEVEL"] = str(self.net_gdr_level)
        if self.debug is not None:
            out["NCCL_DEBUG"] = self.debug
        out.update(self.extra)
        return out


GpuRequest = Literal["gres_typed", "gres", "gpus_per_node"]
AccountPolicy = Literal["required", "optional", "never"]


class Profile(_Strict):
    name: str
    description: str = ""
    cluster: str
    sources: list[str] = Field(default_factory=list)
    # How GPUs are asked for: --gres=gpu:TYPE:N, --gres=gpu:N or --gpus-per-node=N.
    gpu_request: GpuRequest = "gres_typed"
    account: AccountPolicy = "optional"
    default_account: str | None = None
    partitions: list[Partition] = Field(min_length=1)
    qos: list[Qos] = Field(default_factory=list)
    shared_node: SharedNode = Field(default_factory=SharedNode)
    environment: Environment = Field(default_factory=Environment)
    nccl: Nccl = Field(default_factory=Nccl)
    # Where job logs and run directories go; ~ and $VARS expand on the submitting machine.
    output_dir: str = "hpctrain-runs"
    scratch_dir: str | None = None
    # Extra #SBATCH options every job of this cluster needs (e.g. --threads-per-core=1).
    sbatch_defaults: list[str] = Field(default_factory=list)

    @field_validator("name")
    @classmethod
    def _name_ok(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"profile name {v!r} must be letters, digits, '_', '.', '-'")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Profile:
        names = [p.name for p in self.partitions]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate partitions: {', '.join(dupes)}")
        defaults = [p.name for p in self.partitions if p.default]
        if len(defaults) > 1:
            raise ValueError(f"more than one default partition: {', '.join(defaults)}")
        qos_names = {q.name for q in self.qos}
        for p in self.partitions:
            if p.required_qos and p.required_qos not in qos_names:
                raise ValueError(f"partition {p.name} requires QOS {p.required_qos!r}, not in qos")
        if self.account == "never" and self.default_account:
            raise ValueError("default_account is set but account policy is 'never'")
        return self

    @property
    def default_partition(self) -> Partition:
        return next((p for p in self.partitions if p.default), self.partitions[0])

    def partition(self, name: str) -> Partition | None:
        return next((p for p in self.partitions if p.name == name), None)

    def qos_named(self, name: str) -> Qos | None:
        return next((q for q in self.qos if q.name == name), None)
