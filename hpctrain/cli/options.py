"""The options that describe a job (profile, topology, environment, trainer, monitor, command),
declared once for `render`, `submit` and `scale`, and the request they build."""

from __future__ import annotations

import functools
import inspect
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import MISSING, dataclass, fields
from typing import TYPE_CHECKING, Annotated, Any, get_type_hints

import typer
from typer.models import ArgumentInfo

from hpctrain.cli import completion
from hpctrain.units import TIME_FORMS

if TYPE_CHECKING:
    from hpctrain.plan import JobRequest, Launcher
    from hpctrain.profiles import Profile

JOB_PARAM = "job"
LoginOpt = Annotated[
    str | None,
    typer.Option("--login", metavar="DEST", help="Through this ssh destination (as you would "
                 "type it after `ssh`) instead of the profile's `login` host; docs/remote.md."),
]


@dataclass(frozen=True)
class JobOptions:
    """Every option that describes a job: its type, CLI declaration and default, in help order."""

    profile: Annotated[
        str, typer.Option("--profile", "-P", help="Cluster profile name or YAML file.",
                          autocompletion=completion.profile_names)
    ]
    # -p, -N, -t, -A, -J as sbatch spells them: people type what their site's tutorial shows.
    partition: Annotated[
        str | None, typer.Option("--partition", "-p", help="Partition (default: the profile's "
                                 "default).", autocompletion=completion.partition_names)
    ] = None
    nodes: Annotated[int, typer.Option("--nodes", "-N", help="Number of nodes.")] = 1
    gpus_per_node: Annotated[
        int | None,
        typer.Option(help="GPUs per node (default: 1 on one node, the whole node on several)."),
    ] = None
    gpus: Annotated[
        int | None,
        typer.Option("--gpus", metavar="N", help="GPUs in all, as sbatch's --gpus: on one node "
                     "if they fit, else on full nodes (sets --nodes and --gpus-per-node)."),
    ] = None
    cpus_per_task: Annotated[
        int | None, typer.Option(help="CPUs per task (default: the GPUs' share of the node).")
    ] = None
    mem: Annotated[
        str | None, typer.Option(help="Memory per node, e.g. 125000 (MB) or 120G.")
    ] = None
    time: Annotated[
        str | None, typer.Option("--time", "-t", help=f"Wall time in {TIME_FORMS}.")
    ] = None
    account: Annotated[
        str | None, typer.Option("--account", "-A", help="SLURM account.")
    ] = None
    qos: Annotated[str | None, typer.Option(help="Quality of service.")] = None
    constraint: Annotated[
        str | None,
        typer.Option("--constraint", "-C", help="Node feature, e.g. gpu-bw on Raven."),
    ] = None
    job_name: Annotated[str, typer.Option("--job-name", "-J", help="Job name.")] = "hpctrain"
    launcher: Annotated[
        str, typer.Option(help=(
            "How the job starts your program, by what it does: srun if it is one rank (one "
            "task per GPU; Lightning, or torch with RANK/LOCAL_RANK/WORLD_SIZE); torchrun if "
            "it expects torchrun's environment; per-node if it starts its own workers "
            "(mp.spawn, Lightning's launcher on one node). docs/jobs.md, 'Choosing a launcher'."
        ), autocompletion=completion.launcher_names)
    ] = "srun"
    env: Annotated[
        list[str] | None,
        typer.Option("--env", "-e", help="KEY=VALUE exported in the job (repeatable; no secrets)."),
    ] = None
    sbatch_arg: Annotated[
        list[str] | None,
        typer.Option(help="Extra sbatch option, e.g. --sbatch-arg=--mail-type=END (repeatable)."),
    ] = None
    config: Annotated[
        str | None,
        typer.Option("--config", help="Trainer config file for the packaged trainer."),
    ] = None
    global_batch: Annotated[
        int | None,
        typer.Option("--global-batch", min=1, metavar="N",
                     help="Packaged trainer: N samples per optimizer step on any topology "
                     "(per-device batch and gradient accumulation follow)."),
    ] = None
    max_device_batch: Annotated[
        int | None,
        typer.Option("--max-device-batch", min=1, metavar="B",
                     help="With --global-batch: at most B samples per device and step; "
                     "accumulate the rest."),
    ] = None
    python_env: Annotated[
        str | None,
        typer.Option(
            "--python-env",
            help="venv or conda prefix the job activates (default: the one hpctrain runs from; "
            "'none' for none).",
        ),
    ] = None
    grace_s: Annotated[
        int | None,
        typer.Option("--grace", help="Packaged trainer: seconds of warning before the time "
                     "limit, to save a checkpoint (default: the profile's, shrunk to a quarter "
                     "of a --time shorter than twice it)."),
    ] = None
    requeue: Annotated[
        bool,
        typer.Option("--requeue/--no-requeue", help="Packaged trainer: requeue itself after "
                     "that checkpoint, where the site allows it."),
    ] = True
    monitor: Annotated[
        bool,
        typer.Option("--monitor/--no-monitor", help="Sample GPUs, CPU and memory on every node "
                     "into the run directory (see `hpctrain stats`)."),
    ] = True
    monitor_interval: Annotated[
        int, typer.Option(min=1, help="Seconds between the monitor's samples.")
    ] = 10
    command: Annotated[
        list[str] | None,
        typer.Argument(
            help="Command to run after --, e.g. -- python train.py (default: the packaged trainer)."
        ),
    ] = None


def _job_parameters() -> list[inspect.Parameter]:
    """JobOptions' fields as keyword-only parameters that typer reads."""
    hints = get_type_hints(JobOptions, include_extras=True)
    return [
        inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[f.name],
            default=inspect.Parameter.empty if f.default is MISSING else f.default,
        )
        for f in fields(JobOptions)
    ]


def _is_argument(param: inspect.Parameter) -> bool:
    return any(isinstance(m, ArgumentInfo) for m in getattr(param.annotation, "__metadata__", ()))


def with_job_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give a command every job option; it receives them packed as `job`."""
    own = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for p in inspect.signature(command, eval_str=True).parameters.values()
        if p.name != JOB_PARAM
    ]
    topo = _job_parameters()
    names = [p.name for p in topo]
    # Options keep today's help order (topology first); the trailing argument comes last.
    params = [p for p in topo if not _is_argument(p)] + own + [p for p in topo if _is_argument(p)]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> None:
        packed = JobOptions(**{name: kwargs.pop(name) for name in names})
        command(**{JOB_PARAM: packed}, **kwargs)

    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    # typer resolves annotations through get_type_hints too: give it the real objects.
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper


def parse_env(pairs: list[str]) -> dict[str, str]:
    """`KEY=VALUE` pairs as a dict; a pair without `=` is an error."""
    from hpctrain.errors import HpctrainError

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
    """The command line as typed, for the script's header."""
    text = "hpctrain " + shlex.join(sys.argv[1:])
    # Arguments that are not UTF-8 (a file name's raw bytes) are written as escapes.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _launcher(name: str) -> Launcher:
    from hpctrain.plan.launchers import launch_mode

    return launch_mode(name).name


def _python_env(choice: str | None, profile: Profile) -> str | None:
    if choice == "none":
        return None
    return choice or default_python_env(profile)


# Options whose value the request holds in another form; the rest pass through by name.
_CONVERTED = {"profile", "launcher", "env", "sbatch_arg", "command", "python_env", "monitor",
              "monitor_interval", "config", "global_batch", "max_device_batch", "gpus", "nodes",
              "gpus_per_node"}


def trainer_fields(opts: JobOptions) -> dict[str, Any]:
    """The request's command and, for the packaged trainer (no command, or `python -m
    hpctrain.trainer ARGS`), its settings resolved now, submit's --config and batch folded in."""
    from dataclasses import replace

    from hpctrain.errors import ConfigError
    from hpctrain.plan import TRAINER_COMMAND
    from hpctrain.trainconfig.options import TrainerCall, parse_call

    command = tuple(opts.command or ())
    batch = {"--global-batch": opts.global_batch, "--max-device-batch": opts.max_device_batch}
    if command and command[:len(TRAINER_COMMAND)] != TRAINER_COMMAND:
        given = [flag for flag, value in batch.items() if value is not None]
        if given:
            raise ConfigError(f"{given[0]} applies to the packaged trainer",
                              "give your own command its batch size in its own options")
        return {"command": command, "config": opts.config}
    if not command and opts.config is None and not any(v is not None for v in batch.values()):
        # The default task's defaults (JobRequest.trainer None): render need not load pydantic.
        return {"command": ()}
    call = parse_call(command[len(TRAINER_COMMAND):]) if command else TrainerCall()
    if opts.config is not None:
        if call.config is not None:
            raise ConfigError("--config is given twice: to submit and in the trainer's command",
                              "give it once")
        call = replace(call, config=opts.config)
    if call.config is not None and not os.path.exists(call.config):
        raise ConfigError(f"--config {call.config} does not exist", "check the path")
    call = call.adding([("trainer.global_batch", opts.global_batch),
                        ("trainer.max_device_batch", opts.max_device_batch)])
    return {"command": (), "config": call.config, "trainer": call.load(),
            "trainer_args": call.run_args()}


def build_request(opts: JobOptions) -> JobRequest:
    """Load the profile and turn the job options into a JobRequest."""
    from hpctrain.plan import JobRequest
    from hpctrain.profiles import load_profile
    from hpctrain.slurm.sbatch_options import input_variables

    launcher = _launcher(opts.launcher)
    profile = load_profile(opts.profile)
    same = {f.name: getattr(opts, f.name) for f in fields(opts) if f.name not in _CONVERTED}
    req = JobRequest(
        profile=profile,
        launcher=launcher,
        env=parse_env(opts.env or []),
        sbatch_args=tuple(opts.sbatch_arg or ()),
        **trainer_fields(opts),
        python_env=_python_env(opts.python_env, profile),
        invocation=invocation(),
        monitor_interval_s=opts.monitor_interval if opts.monitor else None,
        nodes=opts.nodes,
        gpus_per_node=opts.gpus_per_node,
        shell=input_variables(os.environ),
        **same,
    )
    if opts.gpus is None:
        return req
    from hpctrain.plan.gpus import with_total_gpus

    # --nodes defaults to 1, so 1 cannot be told from "not given": only more nodes fix the side.
    return with_total_gpus(req, opts.gpus, nodes_given=opts.nodes != 1)
