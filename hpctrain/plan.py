"""Profile + topology + options -> a validated job plan (pure: no files, no processes)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from hpctrain.errors import PlanError
from hpctrain.profiles.model import Partition, Profile
from hpctrain.units import format_time, parse_mem_mb, parse_time_seconds

Launcher = Literal["lightning", "torchrun"]

TRAINER_COMMAND = ("python", "-m", "hpctrain.trainer")

# Options hpctrain writes itself; passing them through --sbatch-arg would contradict the plan.
_MANAGED = {
    "--nodes": "--nodes", "-N": "--nodes",
    "--ntasks-per-node": "--gpus-per-node (tasks follow GPUs)", "--ntasks": "--nodes",
    "-n": "--nodes",
    "--partition": "--partition", "-p": "--partition",
    "--time": "--time", "-t": "--time",
    "--job-name": "--job-name", "-J": "--job-name",
    "--account": "--account", "-A": "--account",
    "--qos": "--qos", "-q": "--qos",
    "--constraint": "--constraint", "-C": "--constraint",
    "--output": "the profile's output_dir", "-o": "the profile's output_dir",
    "--error": "the profile's output_dir", "-e": "the profile's output_dir",
    "--cpus-per-task": "--cpus-per-task", "-c": "--cpus-per-task",
    "--mem": "--mem",
    "--gres": "--gpus-per-node", "--gpus-per-node": "--gpus-per-node",
}

# Pairs SLURM refuses or silently mishandles (cluster-facts.md, "Slurm 22.05+ rules").
_EXCLUSIVE: list[tuple[set[str], str]] = [
    ({"--mem", "--mem-per-cpu", "--mem-per-gpu"}, "use at most one of --mem, --mem-per-cpu, "
     "--mem-per-gpu (SLURM refuses the combination)"),
    ({"--cpus-per-task", "--cpus-per-gpu"}, "--cpus-per-task and --cpus-per-gpu are "
     "incompatible (fatal from SLURM 23.11)"),
    ({"--gres", "--gpus-per-node"}, "--gres=gpu and --gpus-per-node together are ambiguous "
     "(fatal in newer SLURM); keep one"),
    ({"--exclusive", "--oversubscribe"}, "--exclusive and --oversubscribe are mutually "
     "exclusive"),
]
_NTASKS_PER_GPU_CONFLICTS = {"--ntasks-per-node", "--gpus-per-task", "--gpus-per-socket"}
_HINT_CONFLICTS = {"--threads-per-core", "--ntasks-per-core", "--cores-per-socket", "--cpu-bind"}

_IDENT = re.compile(r"^[A-Za-z0-9_.+-]+$")
_CONSTRAINT = re.compile(r"^[A-Za-z0-9_.,&|\[\]*:-]+$")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_KEY = re.compile(r"(KEY|TOKEN|SECRET|PASSW(OR)?D|CREDENTIAL)", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


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
    launcher: Launcher = "lightning"
    env: Mapping[str, str] = field(default_factory=dict)
    sbatch_args: Sequence[str] = ()
    command: Sequence[str] = ()
    config: str | None = None
    # The Python environment to activate in the job (a venv or conda prefix), or None.
    python_env: str | None = None
    log_dir: str | None = None
    run_dir: str | None = None
    invocation: str = ""


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
    notes: tuple[str, ...] = ()

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def time(self) -> str:
        return format_time(self.time_seconds)

    @property
    def cpus_per_node(self) -> int:
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
            "account": self.account,
            "qos": self.qos,
            "constraint": self.constraint,
            "job_name": self.job_name,
            "launcher": self.launcher,
            "command": list(self.command),
            "notes": list(self.notes),
        }


def sbatch_option_name(arg: str) -> str:
    """`--mem-per-cpu=4G` -> `--mem-per-cpu`; `-c4` -> `-c`."""
    if arg.startswith("--"):
        return arg.split("=", 1)[0]
    return arg[:2]


def _check_sbatch_args(args: Sequence[str], problems: list[str]) -> list[str]:
    ok: list[str] = []
    for arg in args:
        if _CONTROL.search(arg):
            problems.append(f"--sbatch-arg {arg!r} contains a control character; remove it")
            continue
        if not arg.startswith("-") or arg in ("-", "--"):
            problems.append(
                f"--sbatch-arg {arg!r} is not an sbatch option; pass one option per "
                "--sbatch-arg, e.g. --sbatch-arg=--mail-type=END"
            )
            continue
        name = sbatch_option_name(arg)
        if name in _MANAGED:
            problems.append(
                f"--sbatch-arg {arg} sets what hpctrain manages; use {_MANAGED[name]} instead"
            )
            continue
        if arg.startswith("--") and " " in arg.split("=", 1)[0]:
            problems.append(f"--sbatch-arg {arg!r}: write it as --option=value")
            continue
        ok.append(arg)
    return ok


def _check_exclusive(option_names: set[str], problems: list[str]) -> None:
    for group, why in _EXCLUSIVE:
        hit = sorted(group & option_names)
        if len(hit) > 1:
            problems.append(f"{' and '.join(hit)} conflict: {why}")
    if "--ntasks-per-gpu" in option_names:
        # hpctrain always writes --ntasks-per-node, so --ntasks-per-gpu can never be combined.
        clash = sorted((_NTASKS_PER_GPU_CONFLICTS | {"--ntasks-per-node"}) & option_names)
        problems.append(
            f"--ntasks-per-gpu cannot be combined with {', '.join(clash)}: SLURM refuses it; "
            "hpctrain sets tasks per node from the GPUs, so drop --ntasks-per-gpu"
        )
    if "--hint" in option_names:
        clash = sorted(_HINT_CONFLICTS & option_names)
        if clash:
            problems.append(
                f"--hint with {', '.join(clash)}: SLURM silently ignores --hint; keep one"
            )


def _nearest_allowed(wanted: int, allowed: Sequence[int]) -> int:
    above = [a for a in sorted(allowed) if a >= wanted]
    return above[0] if above else max(allowed)


def _share(profile: Profile, part: Partition, gpus: int) -> tuple[int, int]:
    """CPUs and MB a job with `gpus` GPUs gets on one node under the profile's sharing rule."""
    if part.gpus_per_node == 0 or gpus >= part.gpus_per_node:
        return part.cpus_per_node, part.mem_per_node_mb
    rule = profile.shared_node
    if rule.mode == "per_gpu":
        assert rule.cpus_per_gpu is not None and rule.mem_per_gpu_mb is not None
        return (
            min(part.cpus_per_node, rule.cpus_per_gpu * gpus),
            min(part.mem_per_node_mb, rule.mem_per_gpu_mb * gpus),
        )
    cpus = max(1, part.cpus_per_node * gpus // part.gpus_per_node)
    mem = max(1, part.mem_per_node_mb * gpus // part.gpus_per_node)
    return cpus, mem


def _safe(value: str, pattern: re.Pattern[str], what: str, problems: list[str]) -> bool:
    if not pattern.match(value):
        problems.append(
            f"{what} {value!r} has characters SLURM names never contain; "
            "use letters, digits and . _ - only"
        )
        return False
    return True


def _check_job_name(name: str, problems: list[str]) -> None:
    if not name:
        problems.append("--job-name is empty; give a name, e.g. --job-name spiral")
    elif _CONTROL.search(name):
        problems.append("--job-name contains a newline or control character; remove it")
    elif "/" in name:
        problems.append(f"--job-name {name!r} contains '/': it becomes part of log file names")
    elif len(name) > 200:
        problems.append("--job-name is longer than 200 characters; shorten it")


def _check_path(value: str, what: str, problems: list[str]) -> None:
    if _CONTROL.search(value):
        problems.append(f"{what} contains a newline or control character; choose another path")
    elif "%" in value:
        problems.append(f"{what} {value!r} contains '%', which SLURM reads as a file-name pattern")


def secret_like(key: str) -> bool:
    """Names such as COMET_API_KEY, HF_TOKEN or DB_PASSWORD hold secrets."""
    return bool(_SECRET_KEY.search(key))


def _check_env(env: Mapping[str, str], problems: list[str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key, value in env.items():
        if not _ENV_KEY.match(key):
            problems.append(f"--env {key!r}: variable names are letters, digits and _")
        elif secret_like(key):
            problems.append(
                f"--env {key}: looks like a secret, and hpctrain never writes secrets into "
                f"scripts or the history; export {key} in your shell before submitting "
                "(sbatch passes your environment to the job)"
            )
        elif "\x00" in value:
            problems.append(f"--env {key}: the value contains a NUL byte")
        else:
            out.append((key, value))
    return out


def build_plan(req: JobRequest) -> JobPlan:
    """Validate a request against its profile; raise PlanError listing every problem with a fix."""
    profile = req.profile
    name = profile.name
    problems: list[str] = []
    notes: list[str] = []

    # Partition
    if req.partition is None:
        part = profile.default_partition
    else:
        found = profile.partition(req.partition)
        if found is None:
            known = ", ".join(p.name for p in profile.partitions)
            raise PlanError(
                [f"{name}: unknown partition {req.partition!r}; choose one of: {known}"]
            )
        part = found

    # Topology
    nodes = req.nodes
    if nodes < 1:
        problems.append(f"--nodes {nodes}: a job needs at least 1 node")
        nodes = 1
    node_gpus = part.gpus_per_node
    if req.gpus_per_node is None:
        gpn = node_gpus if nodes > 1 else min(1, node_gpus)
    else:
        gpn = req.gpus_per_node
    if gpn < 0:
        problems.append(f"--gpus-per-node {gpn}: must be 0 or more")
        gpn = 0
    if gpn > node_gpus:
        total = gpn * nodes
        if node_gpus:
            need = math.ceil(total / node_gpus)
            problems.append(
                f"{name}: {gpn} GPUs on one node is impossible ({node_gpus} per node in "
                f"partition {part.name}); use --nodes {need} --gpus-per-node {node_gpus}"
            )
        else:
            problems.append(f"{name}: partition {part.name} has no GPUs; use --gpus-per-node 0")
    elif gpn and part.allowed_gpus_per_node and gpn not in part.allowed_gpus_per_node:
        allowed = ", ".join(map(str, part.allowed_gpus_per_node))
        problems.append(
            f"{name}: {gpn} GPUs per node is not allowed (only {allowed}); use "
            f"--gpus-per-node {_nearest_allowed(gpn, part.allowed_gpus_per_node)}"
        )
    if nodes > 1 and part.multinode_full_nodes and gpn != node_gpus and gpn <= node_gpus:
        problems.append(
            f"{name}: multi-node jobs must use whole nodes ({node_gpus} GPUs per node); use "
            f"--nodes {nodes} --gpus-per-node {node_gpus}, or --nodes 1 for {gpn * nodes} GPU(s)"
        )
    if part.max_nodes is not None and nodes > part.max_nodes:
        problems.append(
            f"{name}: partition {part.name} allows at most {part.max_nodes} node(s) per job; "
            f"use --nodes {part.max_nodes}"
            + ("" if part.max_nodes > 1 else " or another partition")
        )

    # Tasks: Lightning wants one task per GPU (and devices == tasks per node, Lightning
    # #20391); torchrun wants one task per node and spawns the GPU workers itself.
    units = max(gpn, 1)
    tasks = units if req.launcher == "lightning" else 1

    # CPUs and memory follow the GPUs unless given.
    gpu_share = min(gpn, node_gpus) if node_gpus else 0
    share_cpus, share_mem = _share(profile, part, gpu_share)
    strict = profile.shared_node.strict and 0 < gpu_share < node_gpus
    if req.cpus_per_task is None:
        cpt = max(1, share_cpus // tasks)
    else:
        cpt = req.cpus_per_task
        if cpt < 1:
            problems.append(f"--cpus-per-task {cpt}: must be at least 1")
            cpt = 1
    if tasks * cpt > part.cpus_per_node:
        problems.append(
            f"{name}: {tasks} task(s) x {cpt} CPUs = {tasks * cpt} CPUs per node, but "
            f"{part.name} nodes have {part.cpus_per_node}; use --cpus-per-task "
            f"{max(1, part.cpus_per_node // tasks)}"
        )
    elif strict and tasks * cpt > share_cpus:
        problems.append(
            f"{name}: {gpu_share} GPU(s) on a shared node get at most {share_cpus} CPUs; use "
            f"--cpus-per-task {max(1, share_cpus // tasks)}, or take the whole node with "
            f"--gpus-per-node {node_gpus}"
        )

    if req.mem is None:
        mem_mb = share_mem
    else:
        try:
            mem_mb = parse_mem_mb(req.mem)
        except ValueError as e:
            problems.append(f"--mem: {e}")
            mem_mb = share_mem
        if mem_mb == 0:
            problems.append(
                "--mem 0 (all of the node's memory) is refused by some sites (Gilbreth) and "
                "hides the request; give a size, or leave --mem out for the node's share"
            )
            mem_mb = share_mem
        elif mem_mb > part.mem_per_node_mb:
            problems.append(
                f"{name}: --mem {mem_mb} MB is more than a {part.name} node has "
                f"({part.mem_per_node_mb} MB); use --mem {part.mem_per_node_mb} or less"
            )
        elif strict and mem_mb > share_mem:
            problems.append(
                f"{name}: {gpu_share} GPU(s) on a shared node get at most {share_mem} MB; use "
                f"--mem {share_mem}, or take the whole node with --gpus-per-node {node_gpus}"
            )

    # QOS: fill in the partition's required one, refuse a different one.
    qos = req.qos
    if qos is not None and _safe(qos, _IDENT, "--qos", problems):
        if profile.qos and profile.qos_named(qos) is None:
            known = ", ".join(q.name for q in profile.qos)
            problems.append(f"{name}: unknown QOS {qos!r}; choose one of: {known}")
        if part.required_qos and qos != part.required_qos:
            problems.append(
                f"{name}: partition {part.name} requires --qos {part.required_qos} (not {qos})"
            )
    elif qos is None and part.required_qos:
        qos = part.required_qos
        notes.append(f"--qos {qos} added: partition {part.name} requires it")

    # Wall time against the partition's and the QOS's limits.
    limit = part.max_seconds
    limit_by = f"partition {part.name}"
    qos_obj = profile.qos_named(qos) if qos else None
    if qos_obj is not None and qos_obj.max_time is not None:
        qos_limit = parse_time_seconds(qos_obj.max_time)
        if qos_limit < limit:
            limit, limit_by = qos_limit, f"QOS {qos_obj.name}"
    if req.time is None:
        default = part.default_time or part.max_time
        time_s = min(parse_time_seconds(default), limit)
    else:
        try:
            time_s = parse_time_seconds(req.time)
        except ValueError as e:
            problems.append(f"--time: {e}")
            time_s = limit
        if time_s > limit:
            problems.append(
                f"{name}: --time {format_time(time_s)} is over the limit of {limit_by} "
                f"({format_time(limit)}); use --time {format_time(limit)}"
                + (" or another partition" if limit_by.startswith("partition") else "")
            )
        elif time_s <= 0:
            problems.append("--time must be more than zero")

    # Account
    account = req.account if req.account is not None else profile.default_account
    if account is not None:
        if profile.account == "never":
            problems.append(f"{name}: jobs on {profile.cluster} take no --account; drop it")
        else:
            _safe(account, _IDENT, "--account", problems)
    elif profile.account == "required":
        problems.append(
            f"{name}: an account is required on {profile.cluster}; use --account NAME "
            f"(or set default_account in a user profile that extends {name})"
        )

    # Constraint
    constraint = req.constraint or part.default_constraint
    if req.constraint is not None and _safe(req.constraint, _CONSTRAINT, "--constraint", problems):
        c = part.constraint(req.constraint)
        if c is None:
            known = ", ".join(x.name for x in part.constraints) or "none"
            problems.append(
                f"{name}: partition {part.name} has no constraint {req.constraint!r}; "
                f"known: {known}"
            )
        elif c.max_nodes is not None and nodes > c.max_nodes:
            problems.append(
                f"{name}: only {c.max_nodes} node(s) per job with --constraint {c.name}; "
                f"use --nodes {c.max_nodes}"
            )

    # Job name, paths, env, extra options
    _check_job_name(req.job_name, problems)
    log_dir = req.log_dir or profile.output_dir
    _check_path(log_dir, "the log directory", problems)
    if req.run_dir is not None:
        _check_path(req.run_dir, "--run-dir", problems)
    if req.python_env is not None:
        _check_path(req.python_env, "the Python environment path", problems)
    if req.config is not None:
        _check_path(req.config, "--config", problems)
    env = _check_env(req.env, problems)
    extra = [*profile.sbatch_defaults, *_check_sbatch_args(req.sbatch_args, problems)]

    gpu_option = _gpu_option(profile, part, gpn) if gpn > 0 and gpn <= node_gpus else None
    emitted = {"--nodes", "--ntasks-per-node", "--cpus-per-task", "--mem", "--time"}
    if gpu_option:
        emitted.add(sbatch_option_name(gpu_option))
    _check_exclusive(emitted | {sbatch_option_name(a) for a in extra}, problems)

    # Command
    command = tuple(req.command)
    if not command:
        command = (*TRAINER_COMMAND, "--config", req.config) if req.config else (
            *TRAINER_COMMAND, "--task", "spiral")
    elif req.config is not None:
        problems.append("--config applies to the packaged trainer; drop it or the command")
    if any(_CONTROL.search(a.replace("\t", " ")) for a in command):
        problems.append("the command contains a newline or control character; remove it")

    if problems:
        raise PlanError(problems)

    return JobPlan(
        profile=name,
        cluster=profile.cluster,
        partition=part.name,
        emit_partition=not (part.implicit and req.partition is None),
        nodes=nodes,
        gpus_per_node=gpn,
        gpu_type=part.gpu_type if gpn else None,
        tasks_per_node=tasks,
        cpus_per_task=cpt,
        mem_mb=mem_mb,
        time_seconds=time_s,
        account=account,
        qos=qos,
        constraint=constraint,
        job_name=req.job_name,
        launcher=req.launcher,
        gpu_option=gpu_option,
        extra_sbatch=tuple(extra),
        env=tuple(env),
        nccl=tuple(profile.nccl.variables().items()),
        modules=tuple(profile.environment.modules),
        module_use=tuple(profile.environment.module_use),
        module_purge=profile.environment.purge,
        setup_lines=tuple(profile.environment.setup),
        python_env=req.python_env,
        command=command,
        log_dir=log_dir,
        run_dir=req.run_dir,
        invocation=req.invocation,
        notes=tuple(notes),
    )


def _gpu_option(profile: Profile, part: Partition, gpn: int) -> str:
    if profile.gpu_request == "gpus_per_node":
        return f"--gpus-per-node={gpn}"
    if profile.gpu_request == "gres_typed" and part.gpu_type:
        return f"--gres=gpu:{part.gpu_type}:{gpn}"
    return f"--gres=gpu:{gpn}"
