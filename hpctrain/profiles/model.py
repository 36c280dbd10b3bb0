"""Cluster profiles as frozen dataclasses, validated by pydantic (`extra="forbid"`) on load.

Plain dataclasses keep `hpctrain render` fast on a login node: pydantic builds its
validators only when a profile file has changed since it was last validated (see loader),
and nothing here imports it; the field types' checks (fieldtypes.py) hook into pydantic only
when it builds a schema, and the cache's strict constructor (plain.py) runs them without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from hpctrain.profiles.fieldtypes import (
    Bounds,
    CpuCount,
    GpuCount,
    MemMb,
    NodeCount,
    SbatchDefault,
    SlurmTime,
    check_name,
)
from hpctrain.values.units import parse_time_seconds

# pydantic reads this on stdlib dataclasses; a plain dict avoids importing pydantic here.
_FORBID: Any = {"extra": "forbid"}


@dataclass(frozen=True)
class Constraint:
    """A node feature users may select with --constraint on a partition."""

    __pydantic_config__ = _FORBID
    name: str
    description: str = ""
    # Raven's gpu-bw nodes: only 32 exist, so jobs on them are capped lower than the partition.
    max_nodes: NodeCount | None = None


@dataclass(frozen=True)
class NodeType:
    """One kind of node inside a partition (Gilbreth's K and I nodes share `a100-80gb`)."""

    __pydantic_config__ = _FORBID
    # The site's name for the type (Gilbreth "K"), unique within its partition.
    name: str
    gpus: GpuCount
    cpus: CpuCount
    # Usable memory (SLURM's RealMemory): the most --mem may ask for on one node.
    mem_mb: MemMb
    # SLURM node features that select this type with --constraint.
    features: list[str] = field(default_factory=list)
    # None: the partition's gpu_type.
    gpu_type: str | None = None
    # How many nodes of this type the partition has; None when the site does not say.
    nodes: NodeCount | None = None
    description: str = ""

    def __post_init__(self) -> None:
        check_name("node type", self.name)
        for f in self.features:
            check_name("feature", f)
        if self.gpu_type is not None:
            check_name("GPU type", self.gpu_type)


_FLAT = ("gpus_per_node", "cpus_per_node", "mem_per_node_mb")
_TYPE_FIELD = {"gpus_per_node": "gpus", "cpus_per_node": "cpus", "mem_per_node_mb": "mem_mb"}


@dataclass(frozen=True)
class Partition:
    """A SLURM partition: its limits, node types, GPUs and rules."""

    __pydantic_config__ = _FORBID
    name: str
    max_time: SlurmTime
    # The flat shape: one implicit node type. With node_types these are derived (the largest
    # type's values) and, when given, must equal them.
    gpus_per_node: GpuCount | None = None
    cpus_per_node: CpuCount | None = None
    mem_per_node_mb: MemMb | None = None
    node_types: list[NodeType] = field(default_factory=list)
    description: str = ""
    gpu_type: str | None = None
    default_time: SlurmTime | None = None
    # Required in profile files (the loader checks it); optional for profiles built in code.
    max_nodes: NodeCount | None = None
    # GPU counts a job may take on one node (Raven: 1, 2 or 4); None means 1..gpus_per_node
    # (0 too on a partition without GPUs).
    allowed_gpus_per_node: list[int] | None = None
    # Multi-node jobs must take whole nodes (Raven's rule: 4 GPUs per node).
    multinode_full_nodes: bool = False
    required_qos: str | None = None
    # Always emitted (Raven's --constraint=gpu); a user --constraint picks among the features.
    default_constraint: str | None = None
    constraints: list[Constraint] = field(default_factory=list)
    default: bool = False
    # The cluster's default partition, selected without --partition (Raven production scripts).
    implicit: bool = False

    def __post_init__(self) -> None:
        check_name("partition", self.name)
        if self.node_types:
            self._derive_flat()
        elif any(getattr(self, f) is None for f in _FLAT):
            missing = ", ".join(f for f in _FLAT if getattr(self, f) is None)
            raise ValueError(f"give {missing} (one node shape), or node_types")
        if self.allowed_gpus_per_node is not None:
            # 0 allows CPU-only jobs on a GPU partition (they get one GPU's share).
            bad = [g for g in self.allowed_gpus_per_node if not 0 <= g <= self.most_gpus]
            if bad:
                raise ValueError(
                    f"allowed_gpus_per_node {bad} outside 0..{self.most_gpus} (gpus_per_node)"
                )
        if self.default_time is not None and parse_time_seconds(
            self.default_time
        ) > parse_time_seconds(self.max_time):
            raise ValueError(f"default_time {self.default_time} exceeds max_time {self.max_time}")

    def _derive_flat(self) -> None:
        names = [t.name for t in self.node_types]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate node types: {', '.join(dupes)}")
        for flat, attr in _TYPE_FIELD.items():
            largest = max(getattr(t, attr) for t in self.node_types)
            given = getattr(self, flat)
            if given is not None and given != largest:
                raise ValueError(
                    f"{flat} {given} contradicts node_types (the largest has {largest}); "
                    f"drop {flat}: it follows from the types"
                )
            # Frozen: the derived shape is set once, here, as the dataclass is built.
            object.__setattr__(self, flat, largest)

    @property
    def most_gpus(self) -> int:
        """GPUs on the partition's largest node."""
        return max(t.gpus for t in self.types())

    @property
    def max_seconds(self) -> int:
        return parse_time_seconds(self.max_time)

    def types(self) -> list[NodeType]:
        """The partition's node types; a flat partition has one, named after the partition."""
        if self.node_types:
            return list(self.node_types)
        assert self.gpus_per_node is not None and self.cpus_per_node is not None
        assert self.mem_per_node_mb is not None
        return [NodeType(
            name=self.name, gpus=self.gpus_per_node, cpus=self.cpus_per_node,
            mem_mb=self.mem_per_node_mb, features=self._constraint_names(),
            description=self.description,
        )]

    def _constraint_names(self) -> list[str]:
        names: list[str] = []
        for f in [self.default_constraint, *(c.name for c in self.constraints)]:
            if f and f not in names:
                names.append(f)
        return names

    def gpu_type_of(self, node_type: NodeType) -> str | None:
        """The GPU model of a node type (its own, else the partition's); None without GPUs."""
        if not node_type.gpus:
            return None
        return node_type.gpu_type or self.gpu_type

    def features(self) -> list[str]:
        """Every feature a --constraint may name here: the types' and the listed constraints."""
        names = self._constraint_names()
        for t in self.types():
            names.extend(f for f in t.features if f not in names)
        return names

    def constraint(self, name: str) -> Constraint | None:
        return next((c for c in self.constraints if c.name == name), None)


@dataclass(frozen=True)
class Qos:
    """A quality of service a job may ask for, and its time limit."""

    __pydantic_config__ = _FORBID
    name: str
    description: str = ""
    max_time: SlurmTime | None = None


@dataclass(frozen=True)
class SharedNode:
    """How CPUs and memory follow the GPUs on a node shared with other jobs."""

    __pydantic_config__ = _FORBID
    # per_gpu: fixed CPUs and memory per GPU (Raven: 18 and 125000 MB).
    # proportional: the node's CPUs and memory split by the share of GPUs (Marvin, Gilbreth).
    mode: Literal["per_gpu", "proportional"] = "proportional"
    cpus_per_gpu: CpuCount | None = None
    mem_per_gpu_mb: MemMb | None = None
    # Refuse requests above the share instead of only defaulting to it (Raven enforces its split).
    strict: bool = False

    def __post_init__(self) -> None:
        if self.mode == "per_gpu" and (self.cpus_per_gpu is None or self.mem_per_gpu_mb is None):
            raise ValueError("mode per_gpu needs cpus_per_gpu and mem_per_gpu_mb")


@dataclass(frozen=True)
class Environment:
    """How a job's environment is set up: modules, set-up lines, its Python."""

    __pydantic_config__ = _FORBID
    modules: list[str] = field(default_factory=list)
    module_use: list[str] = field(default_factory=list)
    # Some sites need a clean module tree before loading (`module purge`).
    purge: bool = False
    # auto: activate the Python environment hpctrain runs from; none: activate nothing;
    # anything else: a path to a venv or conda prefix to activate.
    python: str = "auto"
    # Extra shell lines the site needs before launch, rendered verbatim (profile authors only).
    setup: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Nccl:
    """NCCL defaults; every value is optional because most sites publish none."""

    __pydantic_config__ = _FORBID
    socket_ifname: str | None = None
    ib_hca: str | None = None
    ib_disable: bool | None = None
    net_gdr_level: Annotated[int, Bounds(0, 5)] | None = None
    debug: Literal["VERSION", "WARN", "INFO", "TRACE"] | None = None
    extra: dict[str, str] = field(default_factory=dict)

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


@dataclass(frozen=True)
class Requeue:
    """How packaged-trainer jobs outlive a time limit: warned, checkpointed, requeued."""

    __pydantic_config__ = _FORBID
    # Sites that forbid --requeue say false: `submit --chain N` carries the run on instead.
    allowed: bool = True
    # Seconds between SLURM's warning signal and the time limit: one checkpoint must fit
    # (SLURM may signal up to 60 s early, which only adds time).
    grace_s: Annotated[int, Bounds(10, 3600)] = 180


@dataclass(frozen=True)
class Login:
    """How a laptop reaches the cluster: an ssh destination and where the project lives there."""

    __pydantic_config__ = _FORBID
    # An ssh destination as the user types it (`raven`, `me@raven.mpcdf.mpg.de`), resolved by
    # their own ssh config (jump hosts, keys, GSSAPI).
    host: str
    # The remote project directory files are synced to (default ~/hpctrain-projects/<dir>).
    workdir: str | None = None
    # The remote venv or conda prefix jobs activate (default: none).
    python: str | None = None
    # An ssh config file used instead of ~/.ssh/config (`ssh -F`).
    ssh_config: str | None = None


RuntimeName = Literal["apptainer", "charliecloud", "pyxis"]


@dataclass(frozen=True)
class ContainerRuntime:
    """A container runtime the cluster's compute nodes offer, and how a job makes it ready."""

    __pydantic_config__ = _FORBID
    name: RuntimeName
    # Modules that put the runtime on PATH (loaded by the batch script with the profile's own).
    modules: list[str] = field(default_factory=list)
    description: str = ""


@dataclass(frozen=True)
class Containers:
    """The container runtimes a job may run its ranks in (`--container`, docs/containers.md)."""

    __pydantic_config__ = _FORBID
    # The first is the default of a job that names none (--container-runtime).
    runtimes: list[ContainerRuntime] = field(default_factory=list)

    def __post_init__(self) -> None:
        names = [r.name for r in self.runtimes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate container runtimes: {', '.join(dupes)}")

    def runtime(self, name: str | None) -> ContainerRuntime | None:
        """The runtime named `name` (None: the default), or None where the cluster lacks it."""
        if name is None:
            return self.runtimes[0] if self.runtimes else None
        return next((r for r in self.runtimes if r.name == name), None)


GpuRequest = Literal["gres_typed", "gres", "gpus_per_node"]
AccountPolicy = Literal["required", "optional", "never"]


@dataclass(frozen=True)
class Profile:
    """A cluster as hpctrain knows it: partitions, environment, login and rules."""

    __pydantic_config__ = _FORBID
    name: str
    cluster: str
    partitions: list[Partition]
    description: str = ""
    sources: list[str] = field(default_factory=list)
    # How GPUs are asked for: --gres=gpu:TYPE:N, --gres=gpu:N or --gpus-per-node=N.
    gpu_request: GpuRequest = "gres_typed"
    account: AccountPolicy = "optional"
    default_account: str | None = None
    qos: list[Qos] = field(default_factory=list)
    # The QOS of jobs that name none (a partition's required_qos still wins on its partition).
    default_qos: str | None = None
    shared_node: SharedNode = field(default_factory=SharedNode)
    environment: Environment = field(default_factory=Environment)
    nccl: Nccl = field(default_factory=Nccl)
    requeue: Requeue = field(default_factory=Requeue)
    # Where job logs and run directories go, relative to the directory jobs are submitted from.
    output_dir: str = "hpctrain-runs"
    scratch_dir: str | None = None
    # Extra #SBATCH options every job of this cluster needs (e.g. --threads-per-core=1); none
    # of those hpctrain writes itself (a second line would contradict it, or be ignored).
    sbatch_defaults: list[SbatchDefault] = field(default_factory=list)
    # Submitting from a laptop over ssh (docs/remote.md).
    login: Login | None = None
    # The GPU-hours your jobs on this cluster may hold at once: a submit whose job, with your
    # queued and running ones, would hold more is refused (docs/queue.md).
    budget_gpu_hours: float | None = None
    # `hpctrain dev`: a dev job with no shell attached and no step running ends after this many
    # seconds (docs/dev.md).
    dev_idle_s: int = 3600
    # Container runtimes on the compute nodes (none: `--container` is refused).
    containers: Containers = field(default_factory=Containers)

    def __post_init__(self) -> None:
        check_name("profile", self.name)
        if not self.partitions:
            raise ValueError("partitions: a profile needs at least one partition")
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
        if self.budget_gpu_hours is not None and not self.budget_gpu_hours > 0:
            raise ValueError(f"budget_gpu_hours: {self.budget_gpu_hours} is not a positive "
                             "number of GPU-hours")
        if self.dev_idle_s < 1:
            raise ValueError(f"dev_idle_s: {self.dev_idle_s} is not a positive number of seconds")
        if self.account == "never" and self.default_account:
            raise ValueError("default_account is set but account policy is 'never'")
        if self.default_qos is not None and self.qos and self.default_qos not in qos_names:
            raise ValueError(f"default_qos {self.default_qos!r} is not in qos; choose one of: "
                             f"{', '.join(sorted(qos_names))}")

    @property
    def default_partition(self) -> Partition:
        return next((p for p in self.partitions if p.default), self.partitions[0])

    def partition(self, name: str) -> Partition | None:
        return next((p for p in self.partitions if p.name == name), None)

    def qos_named(self, name: str) -> Qos | None:
        return next((q for q in self.qos if q.name == name), None)
