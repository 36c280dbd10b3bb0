"""The three ways a job starts the user's program, each named for what that program does.

The choice decides the tasks SLURM places on a node and the variables the program finds; the
template's launch lines (templates/sbatch.sh.j2) follow `LaunchMode.name`. docs/jobs.md,
"Choosing a launcher", and docs/tutorials.md show each with the tutorials' own programs. A
launcher at the front of the user's command (`torchrun ...`, `srun python ...`) is read into
these by plan/launch_lines.py before any of them is chosen.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpctrain.errors import HpctrainError
from hpctrain.plan.model import JobRequest, Launcher
from hpctrain.plan.outcome import Outcome


@dataclass(frozen=True)
class LaunchMode:
    """One launcher: whom it suits, and how many tasks it asks SLURM for on each node."""

    name: Launcher
    # "your program ...": the sentence that tells a user whether this launcher is theirs.
    program: str
    # What the job does with it, for --help and the dry-run summary.
    starts: str
    one_task_per_gpu: bool
    # Variables the job sets for the program (beside MASTER_ADDR and MASTER_PORT).
    sets: tuple[str, ...]

    def tasks_per_node(self, gpus_per_node: int) -> int:
        """Tasks SLURM starts on each node."""
        # One task per GPU must also match Lightning's devices (Lightning #20391); the other two
        # hold the whole node in one task that starts the workers itself.
        return max(gpus_per_node, 1) if self.one_task_per_gpu else 1

    def workers_per_node(self, gpus_per_node: int) -> int:
        """Training processes on each node, once every launcher has started its workers."""
        return max(gpus_per_node, 1)

    def workers_per_task(self, gpus_per_node: int) -> int:
        """Training processes that share one SLURM task's CPUs."""
        return self.workers_per_node(gpus_per_node) // self.tasks_per_node(gpus_per_node)


SRUN = LaunchMode(
    "srun", "your program is one rank",
    "srun starts one task per GPU; each finds its rank in SLURM's variables and in RANK, "
    "LOCAL_RANK, WORLD_SIZE", one_task_per_gpu=True, sets=("RANK", "LOCAL_RANK", "WORLD_SIZE"))
TORCHRUN = LaunchMode(
    "torchrun", "your program expects torchrun's environment",
    "srun starts torchrun once per node; torchrun starts one worker per GPU", False,
    sets=("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK"))
PER_NODE = LaunchMode(
    "per-node",
    "your program starts its own workers (with mp.spawn, Lightning's launcher or torchrun)",
    "srun starts the program once per node with all the node's GPUs and CPUs; it finds "
    "MASTER_ADDR, MASTER_PORT, NNODES, NODE_RANK, GPUS_PER_NODE, WORLD_SIZE", False,
    sets=("NNODES", "NODE_RANK", "GPUS_PER_NODE", "LOCAL_WORLD_SIZE", "WORLD_SIZE"))

LAUNCHERS: dict[str, LaunchMode] = {m.name: m for m in (SRUN, TORCHRUN, PER_NODE)}
# Earlier names, still accepted: `lightning` was srun's name before there were three.
ALIASES = {"lightning": "srun"}

# The rendezvous every launcher sets up (the script's "Rendezvous" lines).
_RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT")


def launch_mode(name: str) -> LaunchMode:
    """The launcher called `name` (or one of its earlier names); refuse others with the list."""
    mode = LAUNCHERS.get(ALIASES.get(name, name))
    if mode is None:
        raise HpctrainError(f"--launcher {name!r} is unknown", "use " + choices_text())
    return mode


def choices_text() -> str:
    """The launchers by what the user's program does, for --help and errors."""
    return "; ".join(f"--launcher {m.name} if {m.program}" for m in LAUNCHERS.values())


def launcher_problems(req: JobRequest) -> Outcome[LaunchMode]:
    """The request's launcher, or why it cannot start this program."""
    mode = launch_mode(req.launcher)
    problems: list[str] = []
    for key in (*_RENDEZVOUS, *mode.sets):
        if key in req.env:
            problems.append(
                f"--env {key}=...: the {mode.name} launcher sets {key} itself, for each "
                f"process or node; leave {key} out"
            )
    return Outcome(mode, tuple(problems))
