"""The plan's values: what the user asked for, and the validated job built from it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from hpctrain.profiles.model import Profile
from hpctrain.values.units import format_time

if TYPE_CHECKING:
    from hpctrain.plan.containerplan import ContainerPlan
    from hpctrain.slurm.reservations import Reservation
    from hpctrain.trainconfig.model import TrainConfig

Launcher = Literal["srun", "torchrun", "per-node"]

TRAINER_COMMAND = ("python", "-m", "hpctrain.trainer")
DEFAULT_MONITOR_INTERVAL_S = 10


@dataclass(frozen=True)
class JobRequest:
    """What the user asked for; None means "the profile's default"."""

    profile: Profile
    partition: str | None = None
    nodes: int = 1
    gpus_per_node: int | None = None
    cpus_per_task: int | None = None
    mem: str | None = None
    time: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    job_name: str = "hpctrain"
    launcher: Launcher = "srun"
    env: Mapping[str, str] = field(default_factory=dict)
    sbatch_args: Sequence[str] = ()
    # The user's own command; empty: the packaged trainer, its command made from `trainer`.
    command: Sequence[str] = ()
    # The user's trainer config file (its copy goes into the run directory).
    config: str | None = None
    # The packaged trainer's resolved settings (None: the default task's), read at submit:
    # the plan's rules check them, the job's command is made from them.
    trainer: TrainConfig | None = None
    # The packaged trainer's options about the run (--run-dir, --resume), as given.
    trainer_args: Sequence[str] = ()
    # The Python environment to activate in the job (a venv or conda prefix), or None.
    python_env: str | None = None
    log_dir: str | None = None
    run_dir: str | None = None
    invocation: str = ""
    # Seconds of warning before the time limit (None: the profile's); whether to requeue.
    grace_s: int | None = None
    requeue: bool = True
    # Jobs in a chain of segments, and jobs that must end well first (afterok).
    chain: int = 1
    after: Sequence[str] = ()
    # Seconds between the per-node monitor's samples; None leaves the monitor out.
    monitor_interval_s: int | None = DEFAULT_MONITOR_INTERVAL_S
    # The stall watch (plan/stall.py): its window ('' derived, 'off', seconds), its action.
    stall_window: str | None = None
    on_stall: str = "cancel"
    # Quarantined nodes of the job's cluster (`hpctrain nodes`) and each partition's nodes, as
    # the submit found them (plan/quarantine.py); --ignore-quarantine leaves them in.
    # Submit again without the suspect node after a stall (the node's failure: SLURM requeues).
    retries: int = 0
    # Restarts of a failed or stalled step inside the allocation (None: the command's default).
    restarts: int | None = None
    quarantined: Sequence[str] = ()
    partition_nodes: Mapping[str, Sequence[str]] | None = None
    ignore_quarantine: bool = False
    # Maintenance reservations of the job's cluster and the time they were read (plan/
    # maintenance.py): a time limit that runs into one is refused with a shorter time.
    maintenance: Sequence[Reservation] = ()
    now: float | None = None
    # The GPU-hours the user's queued and running jobs on the cluster hold (plan/budget.py;
    # None: not asked, or SLURM could not say).
    held_gpu_hours: float | None = None
    # `submit --first-of`: this alternative's NODESxGPUS; the job claims the run or bows out.
    race: str | None = None
    # `render`: a script to read, never submitted by hpctrain; what only the submit needs (the
    # user's account) is a note in it instead of a refusal.
    preview: bool = False
    # Run from a snapshot of the project made at submit (False: --no-snapshot, the live tree);
    # project paths linked into it as they are (data); the job's working directory, once
    # the run directory is known.
    snapshot: bool = True
    in_place: Sequence[str] = ()
    code_dir: str | None = None
    # `hpctrain sweep`: the job is one array of the sweep's points (None: one job).
    array: SweepArray | None = None
    # The submitting shell's variables that sbatch reads as options (SBATCH_*, SLURM_HINT,
    # SLURM_CLUSTERS), as the CLI found them: sbatch would let them override the script, so the
    # plan takes each as a default or refuses it, and the client hides them from sbatch.
    shell: Mapping[str, str] = field(default_factory=dict)
    # `hpctrain dev`: the job holds its allocation for an interactive shell instead of
    # launching the command (docs/dev.md).
    dev: bool = False
    # `--container IMAGE` (plan/container.py): each rank runs in it, with the runtime (None:
    # the profile's first), the binds (SRC:DST), and whose Python ("job", "image"; None: job).
    container: str | None = None
    container_runtime: str | None = None
    container_binds: Sequence[str] = ()
    container_python: str | None = None


@dataclass(frozen=True)
class SweepArray:
    """A sweep's SLURM job array: task T runs point `offset` + T of the sweep, in the run
    directory's `points/<point, zero-padded to width>/`, its settings from `point.args`."""

    offset: int
    size: int
    throttle: int | None
    width: int

    @property
    def spec(self) -> str:
        """sbatch's --array value (task ids start at 0: SLURM's MaxArraySize bounds them)."""
        return f"0-{self.size - 1}" + (f"%{self.throttle}" if self.throttle else "")


@dataclass(frozen=True)
class JobPlan:
    """A validated job: everything the template needs, with no decision left to make."""

    profile: str
    cluster: str
    partition: str
    emit_partition: bool
    nodes: int
    gpus_per_node: int
    gpu_type: str | None
    tasks_per_node: int
    cpus_per_task: int
    mem_mb: int
    time_seconds: int
    account: str | None
    qos: str | None
    constraint: str | None
    job_name: str
    launcher: Launcher
    gpu_option: str | None
    extra_sbatch: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    nccl: tuple[tuple[str, str], ...]
    modules: tuple[str, ...]
    module_use: tuple[str, ...]
    module_purge: bool
    setup_lines: tuple[str, ...]
    python_env: str | None
    command: tuple[str, ...]
    log_dir: str
    run_dir: str | None
    invocation: str
    # The warning signal's lead (None: no signal), requeue, chain length, afterok job ids.
    grace_s: int | None = None
    requeue: bool = False
    chain: int = 1
    after: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    monitor_interval_s: int | None = DEFAULT_MONITOR_INTERVAL_S
    # The stall watch in the monitor: its window ('' derived, 'off', seconds), its action.
    stall_window: str = ""
    on_stall: str = "cancel"
    # Quarantined nodes the job keeps away from (#SBATCH --exclude); --retries.
    exclude: tuple[str, ...] = ()
    retries: int = 0
    # In-job restarts of the launch step (the supervisor; torchrun's own under torchrun).
    restarts: int = 0
    # The partition's node types the job fits on (the --constraint keeps it there).
    node_types: tuple[str, ...] = ()
    # `submit --first-of`: this alternative's NODESxGPUS (the script claims the run first).
    race: str | None = None
    # The snapshot of the project the job runs in (None: where it was submitted from).
    code_dir: str | None = None
    # `hpctrain sweep`: the array of points this script runs (None: one job).
    array: SweepArray | None = None
    # `hpctrain dev`: seconds the allocation waits with no shell and no step before it ends
    # (None: a batch job, which launches its command).
    dev_idle_s: int | None = None
    # `hpctrain dev`: seconds before the time limit that SLURM warns the dev job, which tells
    # the shell (plan/dev.py; None: a batch job, whose warning is grace_s).
    dev_warn_s: int | None = None
    # `--container`: the container each rank runs in (None: the ranks run on the node itself).
    container: ContainerPlan | None = None

    @property
    def total_gpus(self) -> int:
        """GPUs across all nodes."""
        return self.nodes * self.gpus_per_node

    @property
    def gpu_hours(self) -> float:
        """The GPU-hours the job reserves at most: its GPUs for its time limit, each segment
        of a chain (a sweep's script: each point; the study sums its points)."""
        return self.total_gpus * self.time_seconds / 3600 * max(self.chain, 1)

    @property
    def time(self) -> str:
        """The wall time as SLURM writes it."""
        return format_time(self.time_seconds)

    @property
    def cpus_per_node(self) -> int:
        """CPUs the job takes on each node."""
        return self.tasks_per_node * self.cpus_per_task

    def summary(self) -> dict[str, object]:
        """The plan's shape, as shown next to the script and in --json output."""
        return {
            "profile": self.profile,
            "cluster": self.cluster,
            "partition": self.partition,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "gpu_type": self.gpu_type,
            "total_gpus": self.total_gpus,
            "tasks_per_node": self.tasks_per_node,
            "cpus_per_task": self.cpus_per_task,
            "cpus_per_node": self.cpus_per_node,
            "mem_mb_per_node": self.mem_mb,
            "time": self.time,
            "gpu_hours": round(self.gpu_hours, 2),
            "account": self.account,
            "qos": self.qos,
            "constraint": self.constraint,
            "node_types": list(self.node_types),
            "job_name": self.job_name,
            "launcher": self.launcher,
            "command": list(self.command),
            "grace_s": self.grace_s,
            "requeue": self.requeue,
            "chain": self.chain,
            "after": list(self.after),
            "monitor_interval_s": self.monitor_interval_s,
            "stall_window": self.stall_window or "auto",
            "on_stall": self.on_stall,
            "exclude": list(self.exclude),
            "retries": self.retries,
            "restarts": self.restarts,
            "notes": list(self.notes),
            "race": self.race,
            "array": self.array.spec if self.array else None,
            "dev_idle_s": self.dev_idle_s,
            "dev_warn_s": self.dev_warn_s,
            "container": self.container.summary() if self.container else None,
        }
