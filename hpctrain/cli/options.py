"""The job-option table: every option that describes a job (profile, topology, environment,
monitor, command) as data, composed with the packaged trainer's table (trainconfig/options.py),
and the request they build. Every command that takes a job option takes it from here.

A row is a JobOptions field: its type and default, and in its annotation a `Flags` (flags,
help, value name, bound, completion). `with_job_options` gives a command the rows it names,
and the trainer's options it names, as typer parameters, and hands it one parsed `JobOptions`;
`job_option` gives one row as an annotation for a command that takes a single job option.
"""

from __future__ import annotations

import functools
import inspect
import os
import shlex
import sys
from collections.abc import Callable, Iterable
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, get_args, get_type_hints

from hpctrain.cli import completion
from hpctrain.cli.flags import Flags
from hpctrain.trainconfig.options import OPTIONS as TRAINER_OPTIONS
from hpctrain.trainconfig.options import TrainerCall, TrainerOption
from hpctrain.values.units import TIME_FORMS

if TYPE_CHECKING:
    from hpctrain.plan import JobRequest, Launcher
    from hpctrain.profiles import Profile

JOB_PARAM = "job"
Command = TypeVar("Command", bound=Callable[..., None])


@dataclass(frozen=True)
class JobOptions:
    """The job-option table, in help order; a value of it is one command's parsed options."""

    profile: Annotated[str, Flags(("--profile", "-P"), "Cluster profile name or YAML file.",
                                  completion=completion.profile_names)]
    # -p, -N, -t, -A, -J as sbatch spells them: people type what their site's tutorial shows.
    partition: Annotated[str | None, Flags(
        ("--partition", "-p"), "Partition (default: the profile's default).",
        completion=completion.partition_names)] = None
    nodes: Annotated[int, Flags(("--nodes", "-N"), "Number of nodes.")] = 1
    gpus_per_node: Annotated[int | None, Flags(
        ("--gpus-per-node",), "GPUs per node (default: 1 on one node, the whole node on "
        "several).")] = None
    gpus: Annotated[int | None, Flags(
        ("--gpus",), "GPUs in all, as sbatch's --gpus: on one node if they fit, else on full "
        "nodes (sets --nodes and --gpus-per-node).", metavar="N")] = None
    cpus_per_task: Annotated[int | None, Flags(
        ("--cpus-per-task",), "CPUs per task (default: the GPUs' share of the node).")] = None
    mem: Annotated[str | None, Flags(
        ("--mem",), "Memory per node, e.g. 125000 (MB) or 120G.")] = None
    time: Annotated[str | None, Flags(("--time", "-t"), f"Wall time in {TIME_FORMS}.")] = None
    account: Annotated[str | None, Flags(("--account", "-A"), "SLURM account.")] = None
    qos: Annotated[str | None, Flags(("--qos",), "Quality of service.")] = None
    constraint: Annotated[str | None, Flags(
        ("--constraint", "-C"), "Node feature, e.g. gpu-bw on Raven.")] = None
    job_name: Annotated[str, Flags(("--job-name", "-J"), "Job name.")] = "hpctrain"
    launcher: Annotated[str, Flags(
        ("--launcher",), "How the job starts your program, by what it does: srun if it is one "
        "rank (one task per GPU; Lightning, or torch with RANK/LOCAL_RANK/WORLD_SIZE); torchrun "
        "if it expects torchrun's environment; per-node if it starts its own workers "
        "(mp.spawn, Lightning's launcher on one node). docs/jobs.md, 'Choosing a launcher'.",
        completion=completion.launcher_names)] = "srun"
    env: Annotated[list[str] | None, Flags(
        ("--env", "-e"), "KEY=VALUE exported in the job (repeatable; no secrets).")] = None
    sbatch_arg: Annotated[list[str] | None, Flags(
        ("--sbatch-arg",), "Extra sbatch option, e.g. --sbatch-arg=--mail-type=END "
        "(repeatable).")] = None
    python_env: Annotated[str | None, Flags(
        ("--python-env",), "venv or conda prefix the job activates (default: the one hpctrain "
        "runs from; 'none' for none).")] = None
    grace_s: Annotated[int | None, Flags(
        ("--grace",), "Packaged trainer: seconds of warning before the time limit, to save a "
        "checkpoint (default: the profile's, shrunk to a quarter of a --time shorter than "
        "twice it).")] = None
    requeue: Annotated[bool, Flags(
        ("--requeue/--no-requeue",), "Packaged trainer: requeue itself after that checkpoint, "
        "where the site allows it.")] = True
    monitor: Annotated[bool, Flags(
        ("--monitor/--no-monitor",), "Sample GPUs, CPU and memory on every node into the run "
        "directory (see `hpctrain stats`).")] = True
    monitor_interval: Annotated[int, Flags(
        ("--monitor-interval",), "Seconds between the monitor's samples.", min=1)] = 10
    stall_window: Annotated[str | None, Flags(
        ("--stall-window",), "Seconds without any rank's progress that make a stall (default: "
        "20 step times, within 2 and 30 minutes; 'off': no watch).", metavar="SECONDS")] = None
    retries: Annotated[int, Flags(
        ("--retries",), "After a stall that one node's ranks caused, submit the job again "
        "without that node, this many times (a failed node: SLURM requeues the job).",
        min=0)] = 0
    restarts: Annotated[int | None, Flags(
        ("--restarts",), "After a rank dies or the job stalls, stop every rank and start them "
        "again inside the same job, from the last checkpoint, this many times (default: 2 for "
        "the packaged trainer, 0 for your own command).", min=0)] = None
    ignore_quarantine: Annotated[bool, Flags(
        ("--ignore-quarantine",), "Let the job use nodes `hpctrain nodes` lists as "
        "quarantined (they are excluded by default).")] = False
    on_stall: Annotated[str, Flags(
        ("--on-stall",), "On a stall, after every rank's stack is kept: cancel the job, "
        "requeue it (from its checkpoint), or only report.",
        metavar="cancel|requeue|report")] = "cancel"
    container: Annotated[str | None, Flags(
        ("--container",), "Run each rank in this container image (the batch script, monitor "
        "and requeue stay outside; docs/containers.md).", metavar="IMAGE")] = None
    container_runtime: Annotated[str | None, Flags(
        ("--container-runtime",), "The container runtime, where the profile offers several "
        "(default: its first).", metavar="apptainer|charliecloud|pyxis")] = None
    container_bind: Annotated[list[str] | None, Flags(
        ("--container-bind",), "Bind SRC into the container at DST (repeatable; the run "
        "directory, the code and the job's Python are bound in already).",
        metavar="SRC:DST")] = None
    container_python: Annotated[str | None, Flags(
        ("--container-python",), "The Python the ranks run: the job's own environment, bound "
        "in (default), or the image's.", metavar="job|image")] = None
    command: Annotated[list[str] | None, Flags(
        (), "Command to run after --, e.g. -- python train.py (default: the packaged trainer).",
        argument=True)] = None
    # The packaged trainer's options the command takes (the trainer's own table), parsed.
    trainer: TrainerCall = field(default_factory=TrainerCall)


# The trainer's options that the job commands take: its settings, not the run's own options
# (--run-dir, --resume, --print-config belong after `-- python -m hpctrain.trainer`).
TRAINER_FLAGS = ("--config", "--task", "--set", "--max-epochs", "--global-batch",
                 "--max-device-batch")
# Options that make the job, with a prefix that says so beside the job's own options.
TRAINER_HELP = "Packaged trainer: "


@dataclass(frozen=True)
class Row:
    """One entry of the job-option table: its name, type, default and flags."""

    name: str
    type: Any
    default: Any
    flags: Flags

    def parameter(self) -> inspect.Parameter:
        """The row as the keyword parameter typer reads."""
        return inspect.Parameter(self.name, inspect.Parameter.KEYWORD_ONLY,
                                 annotation=Annotated[self.type, self.flags.declaration()],
                                 default=self.default)


@functools.cache
def job_table() -> tuple[Row, ...]:
    """The job-option table's rows, in help order."""
    hints = get_type_hints(JobOptions, include_extras=True)
    rows = []
    for f in fields(JobOptions):
        kind, *meta = get_args(hints[f.name]) or (hints[f.name],)
        flags = next((m for m in meta if isinstance(m, Flags)), None)
        if flags is not None:
            default = inspect.Parameter.empty if f.default is MISSING else f.default
            rows.append(Row(f.name, kind, default, flags))
    return tuple(rows)


def job_option(name: str, help: str | None = None) -> Any:
    """The typer declaration of the table's row `name`, for a command that takes that one
    option on its own (annotate it `Annotated[<the row's type>, job_option(name)]`); `help`
    where its default means something else there (Flags.declaration)."""
    (row,) = [r for r in job_table() if r.name == name]
    return row.flags.declaration(help)


def trainer_option(flag: str) -> TrainerOption:
    """The trainer's table entry for `flag`."""
    (option,) = [o for o in TRAINER_OPTIONS if o.flag == flag]
    return option


def _trainer_values(option: TrainerOption) -> Callable[[str], list[completion.Item]] | None:
    """What the shell completes for a trainer option: the tasks, or its choices."""
    if option.flag == "--task":
        return completion.task_names
    if not option.choices:
        return None
    choices = option.choices

    def values(incomplete: str) -> list[completion.Item]:
        return [(c, "") for c in choices if c.startswith(incomplete)]

    return values


def trainer_parameter(option: TrainerOption, help_prefix: str = "") -> inspect.Parameter:
    """One entry of the trainer's table as the keyword parameter typer reads."""
    import typer

    declared = typer.Option(option.flag, help=help_prefix + option.help, metavar=option.metavar,
                            show_default=False, autocompletion=_trainer_values(option))
    kind: Any = {bool: bool, list: list[str] | None, str: str | None}[option.value_type]
    return inspect.Parameter(option.dest, inspect.Parameter.KEYWORD_ONLY,
                             annotation=Annotated[kind, declared],
                             default=False if option.switch else None)


def signature_of(command: Callable[..., Any], params: list[inspect.Parameter]) -> None:
    """Give `command` these parameters, as typer reads them."""
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    # typer resolves annotations through get_type_hints too: give it the real objects.
    command.__annotations__ = {p.name: p.annotation for p in params}


def with_job_options(names: Iterable[str] | None = None,
                     trainer: Iterable[str] = TRAINER_FLAGS) -> Callable[[Command], Command]:
    """Give a command the job options `names` (None: all) and the trainer's options `trainer`
    (flags), from the tables; it receives them packed as `job`, the rest at their defaults."""
    chosen = None if names is None else set(names)
    rows = [r for r in job_table() if chosen is None or r.name in chosen]
    extra = [trainer_parameter(trainer_option(f), TRAINER_HELP) for f in trainer]

    def decorate(command: Command) -> Command:
        own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
               for p in inspect.signature(command, eval_str=True).parameters.values()
               if p.name != JOB_PARAM]
        job = [r.parameter() for r in rows]
        clash = {p.name for p in own} & {p.name for p in job + extra}
        if clash:
            raise TypeError(f"{command.__name__}: {sorted(clash)} are job or trainer options")
        # The job's options, the trainer's, the command's own; the trailing argument last.
        args = [p for p in job if _is_argument(p)]
        params = [p for p in job if p not in args] + extra + own + args

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> None:
            call = TrainerCall.from_values({p.name: kwargs.pop(p.name) for p in extra})
            packed = JobOptions(**{p.name: kwargs.pop(p.name) for p in job}, trainer=call)
            command(**{JOB_PARAM: packed}, **kwargs)

        signature_of(wrapper, params)
        return wrapper  # type: ignore[return-value]

    return decorate


def job_command(module: str, name: str, own: Iterable[Row]) -> Callable[..., None]:
    """A job command for typer: the table's job and trainer options, then the command's own
    rows (`own`), handed to `module.name(job, **own)` (looked up when called: tests replace
    it)."""
    def command(job: JobOptions, **values: Any) -> None:
        getattr(sys.modules[module], name)(job, **values)

    command.__doc__ = getattr(sys.modules[module], name).__doc__
    signature_of(command, [r.parameter() for r in own])
    return with_job_options()(command)


def _is_argument(param: inspect.Parameter) -> bool:
    from typer.models import ArgumentInfo

    return any(isinstance(m, ArgumentInfo)
               for m in getattr(param.annotation, "__metadata__", ()))


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
              "monitor_interval", "trainer", "gpus", "nodes", "gpus_per_node",
              "container", "container_bind"}


def trainer_fields(opts: JobOptions) -> dict[str, Any]:
    """The request's command and, for the packaged trainer (no command, or `python -m
    hpctrain.trainer ARGS`), its settings resolved now, the command's trainer options folded
    in after the trainer command's own."""
    from hpctrain.errors import ConfigError
    from hpctrain.plan import TRAINER_COMMAND
    from hpctrain.trainconfig.options import parse_call

    command = tuple(opts.command or ())
    if command and command[:len(TRAINER_COMMAND)] != TRAINER_COMMAND:
        # --config reaches the plan, which refuses it beside a command in its own words.
        given = [flag for flag in opts.trainer.given() if flag != "--config"]
        if given:
            raise ConfigError(f"{given[0]} applies to the packaged trainer",
                              "give your own command its settings in its own options")
        return {"command": command, "config": opts.trainer.config}
    if not command and opts.trainer == TrainerCall():
        # The default task's defaults (JobRequest.trainer None): render need not load pydantic.
        return {"command": ()}
    call = parse_call(command[len(TRAINER_COMMAND):]) if command else TrainerCall()
    call = call.joined(opts.trainer)
    if call.config is not None and not os.path.exists(call.config):
        raise ConfigError(f"--config {call.config} does not exist", "check the path")
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
        container=opts.container, container_binds=tuple(opts.container_bind or ()),
        **same,
    )
    if opts.gpus is None:
        return req
    from hpctrain.plan.gpus import with_total_gpus

    # --nodes defaults to 1, so 1 cannot be told from "not given": only more nodes fix the side.
    return with_total_gpus(req, opts.gpus, nodes_given=opts.nodes != 1)
