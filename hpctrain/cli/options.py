"""The topology options shared by `render` and `submit`, and the request they build."""

from __future__ import annotations

import shlex
import sys
from dataclasses import dataclass, field
from typing import Annotated

import typer

from hpctrain.errors import HpctrainError
from hpctrain.plan import JobRequest, Launcher
from hpctrain.profiles import Profile, load_profile

ProfileOpt = Annotated[
    str, typer.Option("--profile", "-P", help="Cluster profile name or YAML file.")
]
PartitionOpt = Annotated[
    str | None, typer.Option(help="Partition (default: the profile's default).")
]
NodesOpt = Annotated[int, typer.Option("--nodes", "-N", help="Number of nodes.")]
GpusOpt = Annotated[
    int | None,
    typer.Option(help="GPUs per node (default: 1 on one node, the whole node on several)."),
]
CpusOpt = Annotated[
    int | None, typer.Option(help="CPUs per task (default: the GPUs' share of the node).")
]
MemOpt = Annotated[
    str | None, typer.Option(help="Memory per node, e.g. 125000 (MB) or 120G.")
]
TimeOpt = Annotated[
    str | None, typer.Option("--time", "-t", help="Wall time, e.g. 2:00:00 or 1-00:00:00.")
]
AccountOpt = Annotated[str | None, typer.Option("--account", "-A", help="SLURM account.")]
QosOpt = Annotated[str | None, typer.Option(help="Quality of service.")]
ConstraintOpt = Annotated[
    str | None, typer.Option("--constraint", "-C", help="Node feature, e.g. gpu-bw on Raven.")
]
JobNameOpt = Annotated[str, typer.Option("--job-name", "-J", help="Job name.")]
LauncherOpt = Annotated[
    str, typer.Option(help="lightning (srun, one task per GPU) or torchrun (one per node).")
]
EnvOpt = Annotated[
    list[str] | None,
    typer.Option("--env", "-e", help="KEY=VALUE exported in the job (repeatable; no secrets)."),
]
SbatchArgOpt = Annotated[
    list[str] | None,
    typer.Option(help="Extra sbatch option, e.g. --sbatch-arg=--mail-type=END (repeatable)."),
]
ConfigOpt = Annotated[
    str | None, typer.Option("--config", help="Trainer config file for the packaged trainer.")
]
PythonEnvOpt = Annotated[
    str | None,
    typer.Option(
        "--python-env",
        help="venv or conda prefix the job activates (default: the one hpctrain runs from; "
        "'none' for none).",
    ),
]
CommandArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="Command to run after --, e.g. -- python train.py (default: the packaged trainer)."
    ),
]


@dataclass
class TopologyOptions:
    profile: str
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
    launcher: str = "lightning"
    env: list[str] = field(default_factory=list)
    sbatch_args: list[str] = field(default_factory=list)
    config: str | None = None
    python_env: str | None = None
    command: list[str] = field(default_factory=list)


def parse_env(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise HpctrainError(f"--env {pair!r} is not KEY=VALUE", "e.g. --env OMP_NUM_THREADS=8")
        out[key] = value
    return out


def default_python_env(profile: Profile) -> str | None:
    """The environment jobs activate: the profile's choice, or the venv hpctrain runs from."""
    choice = profile.environment.python
    if choice == "none":
        return None
    if choice != "auto":
        return choice
    return sys.prefix if sys.prefix != sys.base_prefix else None


def invocation() -> str:
    return "hpctrain " + shlex.join(sys.argv[1:])


def build_request(opts: TopologyOptions) -> JobRequest:
    """Load the profile and turn CLI options into a JobRequest."""
    if opts.launcher not in ("lightning", "torchrun"):
        raise HpctrainError(
            f"--launcher {opts.launcher!r} is unknown", "use --launcher lightning or torchrun"
        )
    launcher: Launcher = "torchrun" if opts.launcher == "torchrun" else "lightning"
    profile = load_profile(opts.profile)
    if opts.python_env == "none":
        python_env = None
    elif opts.python_env:
        python_env = opts.python_env
    else:
        python_env = default_python_env(profile)
    return JobRequest(
        profile=profile,
        partition=opts.partition,
        nodes=opts.nodes,
        gpus_per_node=opts.gpus_per_node,
        cpus_per_task=opts.cpus_per_task,
        mem=opts.mem,
        time=opts.time,
        account=opts.account,
        qos=opts.qos,
        constraint=opts.constraint,
        job_name=opts.job_name,
        launcher=launcher,
        env=parse_env(opts.env),
        sbatch_args=tuple(opts.sbatch_args),
        command=tuple(opts.command),
        config=opts.config,
        python_env=python_env,
        invocation=invocation(),
    )
