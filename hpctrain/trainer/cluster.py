"""How this process was launched: torchrun, SLURM's srun, or plainly; and where the run lives.

Pure functions of the environment (no torch), so that the launch rules are easy to test.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hpctrain.errors import ConfigError

Launch = Literal["local", "slurm", "torchrun", "per-node"]
# Set by the node's trainer of a per-node launch for its workers (trainer/workers.py).
NODE_WORKER_VAR = "HPCTRAIN_NODE_WORKER"

# Lightning's own rule: jobs named like this are interactive shells, not training steps.
INTERACTIVE_JOB_NAMES = ("bash", "interactive")


@dataclass(frozen=True)
class ProcessLayout:
    """The process layout of a run as the launcher set it up."""

    launch: Launch
    world_size: int
    num_nodes: int
    devices_per_node: int
    global_rank: int = 0
    local_rank: int = 0
    node_rank: int = 0
    job_id: str | None = None

    @property
    def is_rank_zero(self) -> bool:
        return self.global_rank == 0


def _int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(
            f"{name}={raw!r} is not a whole number", "check the job environment"
        ) from None


def parse_tasks_per_node(value: str) -> list[int]:
    """Expand SLURM's compressed per-node counts, e.g. '2(x3),1' -> [2, 2, 2, 1]."""
    counts: list[int] = []
    for part in value.split(","):
        match = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if not match:
            raise ConfigError(f"cannot read SLURM tasks-per-node value {value!r}")
        counts += [int(match.group(1))] * int(match.group(2) or 1)
    return counts


def slurm_job_id(env: Mapping[str, str]) -> str | None:
    """The job id, as ARRAYJOB_TASK for array jobs (stable across requeues)."""
    array_job, array_task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    if array_job and array_task:
        return f"{array_job}_{array_task}"
    return env.get("SLURM_JOB_ID") or None


def is_srun_task(env: Mapping[str, str]) -> bool:
    """True for a task started by srun (or an emulation of one) in a non-interactive job."""
    return (
        "SLURM_NTASKS" in env
        and "SLURM_PROCID" in env
        and env.get("SLURM_JOB_NAME") not in INTERACTIVE_JOB_NAMES
    )


def is_torchrun_worker(env: Mapping[str, str]) -> bool:
    """True for a worker started by torchrun (torch.distributed.run)."""
    return "TORCHELASTIC_RUN_ID" in env or all(
        k in env for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    )


def _torchrun_topology(env: Mapping[str, str]) -> ProcessLayout:
    world = _int(env, "WORLD_SIZE") or 1
    local_world = _int(env, "LOCAL_WORLD_SIZE") or world
    if world % local_world:
        raise ConfigError(
            f"torchrun started WORLD_SIZE={world} workers with LOCAL_WORLD_SIZE={local_world}: "
            "not the same number on every node",
            "use the same --nproc-per-node on every node",
        )
    return ProcessLayout(
        launch="per-node" if env.get(NODE_WORKER_VAR) else "torchrun",
        world_size=world,
        num_nodes=world // local_world,
        devices_per_node=local_world,
        global_rank=_int(env, "RANK") or 0,
        local_rank=_int(env, "LOCAL_RANK") or 0,
        node_rank=_int(env, "GROUP_RANK") or 0,
        job_id=slurm_job_id(env) or env.get("TORCHELASTIC_RUN_ID"),
    )


def _slurm_topology(env: Mapping[str, str]) -> ProcessLayout:
    # srun overwrites SLURM_NTASKS/SLURM_NNODES for its step and adds the SLURM_STEP_* layout;
    # SLURM_NTASKS_PER_NODE keeps the job's request, which is what Lightning compares against.
    tasks = _int(env, "SLURM_STEP_NUM_TASKS") or _int(env, "SLURM_NTASKS") or 1
    nodes = (
        _int(env, "SLURM_STEP_NUM_NODES")
        or _int(env, "SLURM_NNODES")
        or _int(env, "SLURM_JOB_NUM_NODES")
        or 1
    )
    layout = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE")
    requested = _int(env, "SLURM_NTASKS_PER_NODE")
    if layout:
        counts = parse_tasks_per_node(layout)
        if len(set(counts)) > 1:
            raise ConfigError(
                f"SLURM placed a different number of tasks on each node ({layout}); "
                "DDP needs the same number everywhere",
                "request --ntasks-per-node=<GPUs per node> instead of --ntasks",
            )
        per_node = counts[0]
    elif requested is not None:
        per_node = requested
    else:
        if tasks % nodes:
            raise ConfigError(
                f"SLURM_NTASKS={tasks} tasks do not split evenly over SLURM_NNODES={nodes} nodes",
                "request --ntasks-per-node=<GPUs per node> instead of --ntasks",
            )
        per_node = tasks // nodes
    if (requested is not None and requested != per_node) or per_node * nodes != tasks:
        # Lightning issue #20391: with SLURM_NTASKS < nodes x SLURM_NTASKS_PER_NODE, Lightning
        # counts SLURM_NTASKS_PER_NODE devices while only SLURM_NTASKS processes exist.
        raise ConfigError(
            f"SLURM runs SLURM_NTASKS={tasks} task(s) on {nodes} node(s), but the job asked for "
            f"SLURM_NTASKS_PER_NODE={requested if requested is not None else per_node} per node "
            "(Lightning would miscount the devices, Lightning issue #20391)",
            "drop --ntasks, or make it equal to --nodes x --ntasks-per-node",
        )
    return ProcessLayout(
        launch="slurm",
        world_size=tasks,
        num_nodes=nodes,
        devices_per_node=per_node,
        global_rank=_int(env, "SLURM_PROCID") or 0,
        local_rank=_int(env, "SLURM_LOCALID") or 0,
        node_rank=_int(env, "SLURM_NODEID") or 0,
        job_id=slurm_job_id(env),
    )


def detect_topology(
    env: Mapping[str, str] | None = None,
    devices: int | str = "auto",
    num_nodes: int | str = "auto",
) -> ProcessLayout:
    """The layout from the launcher's variables, checked against the config's devices/num_nodes."""
    env = os.environ if env is None else env
    if is_torchrun_worker(env):
        topo, source = _torchrun_topology(env), "torchrun (LOCAL_WORLD_SIZE, WORLD_SIZE)"
    elif is_srun_task(env):
        topo, source = _slurm_topology(env), "SLURM (SLURM_NTASKS_PER_NODE, SLURM_NNODES)"
    else:
        if num_nodes not in ("auto", 1):
            raise ConfigError(
                f"trainer.num_nodes={num_nodes} needs a multi-node launch, but this process "
                "was not started by srun or torchrun",
                "submit the job with `hpctrain submit`, or set trainer.num_nodes: auto",
            )
        per_node = 1 if devices == "auto" else int(devices)
        return ProcessLayout(launch="local", world_size=per_node, num_nodes=1,
                             devices_per_node=per_node)
    if devices != "auto" and devices != topo.devices_per_node:
        raise ConfigError(
            f"the config pins trainer.devices={devices}, but {source} gives "
            f"{topo.devices_per_node} process(es) per node",
            f"set trainer.devices: auto (or {topo.devices_per_node}), or change the job's "
            "--ntasks-per-node",
        )
    if num_nodes != "auto" and num_nodes != topo.num_nodes:
        raise ConfigError(
            f"the config pins trainer.num_nodes={num_nodes}, but {source} gives "
            f"{topo.num_nodes} node(s)",
            f"set trainer.num_nodes: auto (or {topo.num_nodes}), or change the job's --nodes",
        )
    return topo


def resolve_run_dir(
    run_dir: str | Path | None, task: str, topo: ProcessLayout, env: Mapping[str, str] | None = None
) -> Path:
    """--run-dir, else $HPCTRAIN_RUN_DIR, else ./hpctrain-runs/<task>-<job id or timestamp>."""
    env = os.environ if env is None else env
    if run_dir is not None:
        return Path(run_dir).expanduser().absolute()
    if env.get("HPCTRAIN_RUN_DIR"):
        return Path(env["HPCTRAIN_RUN_DIR"]).expanduser().absolute()
    # Every rank must name the same directory, so distributed runs use the job id, not the clock.
    stamp = topo.job_id if topo.launch != "local" and topo.job_id else None
    if stamp is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
    return (Path.cwd() / "hpctrain-runs" / f"{task}-{stamp}").absolute()
