"""Rules for the sbatch options: the GPU request, and the extra options from the profile, the
user (--sbatch-arg) and the submitting shell (SBATCH_* variables). One owner per resource:
what hpctrain writes itself is refused elsewhere, with hpctrain's own spelling as the fix."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hpctrain.plan.model import TRAINER_COMMAND, JobRequest
from hpctrain.plan.nodetypes import Fit
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.restart import runs_trainer
from hpctrain.plan.text import CONTROL
from hpctrain.profiles.fieldtypes import sbatch_default_problem
from hpctrain.profiles.model import Profile
from hpctrain.slurm.sbatch_options import (
    INPUT_VARIABLES,
    SbatchArg,
    more_options,
    parse_arg,
    takes_value,
)

_SRUN_TASKS = "(one task per GPU with --launcher srun)"
_LOGS = "nothing: each run's logs go to its run directory (`hpctrain logs JOB`)"
# hpctrain's spelling of what each sbatch option asks for: {v} is the option's value, {n} its
# count (`a100:4` -> 4; N where it has none).
_SPELLING = {
    "gpus": "--gpus {n} (GPUs in all, as sbatch's -G)",
    "gpus-per-node": "--gpus-per-node {n}",
    "gres": "--gpus-per-node {n} (hpctrain writes the profile's GPU request)",
    "gpus-per-task": f"--gpus-per-node N {_SRUN_TASKS}",
    "gpus-per-socket": "--gpus-per-node N",
    "ntasks": f"--gpus {{v}} {_SRUN_TASKS}",
    "ntasks-per-node": f"--gpus-per-node {{v}} {_SRUN_TASKS}",
    "ntasks-per-gpu": f"nothing: tasks follow the GPUs {_SRUN_TASKS}",
    "cpus-per-task": "--cpus-per-task {v}",
    "cpus-per-gpu": f"--cpus-per-task {{v}} {_SRUN_TASKS}",
    "mincpus": "--cpus-per-task N",
    "tres-per-task": "--cpus-per-task N and --gpus-per-node N",
    "mem": "--mem {v}",
    "mem-per-cpu": "--mem MEMORY (per node: {v} for each of its CPUs)",
    "mem-per-gpu": "--mem MEMORY (per node: {v} for each of its GPUs)",
    "nodes": "--nodes {v}", "partition": "--partition {v}", "qos": "--qos {v}",
    "time": "--time {v}", "account": "--account {v}", "job-name": "--job-name {v}",
    "constraint": "--constraint {v}",
    "output": _LOGS, "input": _LOGS,
    "error": "nothing: each run's logs go to its run directory (`hpctrain logs JOB --err`)",
    "chdir": "nothing: the job starts in the run directory, with your project beside it",
    "dependency": "--after JOBID or --chain N",
    "array": "`hpctrain sweep` (a grid or list of runs as job arrays)",
    "signal": "--grace SECONDS", "requeue": "--requeue", "no-requeue": "--no-requeue",
    "open-mode": "nothing (logs are appended across requeues)",
    "clusters": "the profile of that cluster (a profile is one cluster)",
    "wait": "`hpctrain submit`, then `hpctrain logs -f JOB`",
    "test-only": "`hpctrain render --check`",
    "parsable": "nothing: hpctrain submits with --parsable",
    "wrap": "a command after --", "help": "`hpctrain submit --help`",
    "usage": "`hpctrain submit --help`", "version": "`hpctrain --version`",
}
# What stands for a value an option was given without.
_PLACEHOLDER = {"partition": "NAME", "qos": "NAME", "account": "NAME", "job-name": "NAME",
                "constraint": "FEATURE", "time": "TIME", "mem": "MEMORY",
                "mem-per-cpu": "MEMORY", "mem-per-gpu": "MEMORY"}
# Options hpctrain writes only for the packaged trainer; your own command may pass them.
_TRAINER_ONLY = frozenset({"signal", "requeue", "no-requeue", "open-mode"})
# Shell variables that stand for an hpctrain option the rules take as its default (limits.py,
# access.py); the rest of what hpctrain decides is refused here.
SHELL_DEFAULTS = {"SBATCH_ACCOUNT": "--account", "SBATCH_QOS": "--qos",
                  "SBATCH_TIMELIMIT": "--time"}

# Pairs SLURM refuses or silently mishandles among the options hpctrain leaves to sbatch
# (docs/cluster-facts.md, "Slurm 22.05+ rules for the validator"); the rest of those rules
# concern options hpctrain writes itself, which no other source may give.
_EXCLUSIVE: list[tuple[set[str], str]] = [
    ({"--exclusive", "--oversubscribe"}, "--exclusive and --oversubscribe are mutually "
     "exclusive"),
]
_HINT_CONFLICTS = {"--threads-per-core", "--ntasks-per-core", "--cores-per-socket"}


@dataclass(frozen=True)
class SbatchOptions:
    """The GPU request option, if any, and the extra options after the plan's own."""

    gpu_option: str | None
    extra: tuple[str, ...]


def sbatch_option_name(arg: str) -> str:
    """`--mem-per-cpu=4G` -> `--mem-per-cpu`; `-c4` -> `--cpus-per-task`; `--part=x` ->
    `--partition` (sbatch takes a unique prefix); an unknown option as written."""
    return parse_arg(arg).flag


def hpctrain_spelling(option: SbatchArg) -> str | None:
    """hpctrain's own option for what `option` asks for, its value carried over (None:
    hpctrain leaves that to sbatch)."""
    if option.name is None or option.name not in _SPELLING:
        return None
    value = option.value or _PLACEHOLDER.get(option.name, "N")
    last = value.rsplit(":", 1)[-1]
    return _SPELLING[option.name].replace("{n}", last if last.isdigit() else "N").replace(
        "{v}", value)


def sbatch_options(req: JobRequest, fit: Fit, gpus_per_node: int) -> Outcome[SbatchOptions]:
    """The profile's, the user's and the shell's extra options, refused where they would
    contradict the plan's own lines."""
    gpu_option = _gpu_option(req.profile, fit, gpus_per_node)
    trainer = runs_trainer(req.command or TRAINER_COMMAND)
    problems = [f"{req.profile.name}: sbatch_defaults {p}" for arg in req.profile.sbatch_defaults
                if (p := sbatch_default_problem(arg))]
    extra: list[str] = list(req.profile.sbatch_defaults)
    for arg in req.sbatch_args:
        problem = _sbatch_arg_problem(arg, gpu_option)
        if problem:
            problems.append(problem)
        else:
            extra.append(_normal(arg))
    shell = shell_options(req, {sbatch_option_name(a) for a in extra}, gpu_option, trainer)
    problems.extend(shell.problems)
    extra.extend(shell.value)
    problems.extend(_conflicts({sbatch_option_name(a) for a in extra}))
    return Outcome(SbatchOptions(gpu_option, tuple(extra)), tuple(problems),
                   notes=shell.notes)


def _sbatch_arg_problem(arg: str, gpu_option: str | None) -> str | None:
    if CONTROL.search(arg):
        return f"--sbatch-arg {arg!r} contains a control character; remove it"
    if not arg.startswith("-") or arg in ("-", "--"):
        return (
            f"--sbatch-arg {arg!r} is not an sbatch option; pass one option per "
            "--sbatch-arg, e.g. --sbatch-arg=--mail-type=END"
        )
    if more_options(arg):
        return (f"--sbatch-arg {arg!r} holds several options; sbatch reads one: pass each "
                "with its own --sbatch-arg")
    option = parse_arg(arg)
    clash = _clash(option, gpu_option)
    if clash:
        return f"--sbatch-arg {arg} sets what hpctrain writes itself; {_instead(clash)}"
    if option.name is None and arg.startswith("--") and " " in arg.split("=", 1)[0]:
        return f"--sbatch-arg {arg!r}: write it as --option=value"
    return None


def _clash(option: SbatchArg, gpu_option: str | None) -> str | None:
    """hpctrain's spelling where `option` would contradict one of the script's own lines."""
    if option.name in _TRAINER_ONLY:
        return None  # plan/restart.py refuses them where hpctrain writes them
    if _other_gres(option):
        # Another generic resource (nvme:1) stands beside --gpus-per-node; a second --gres
        # line would replace the GPU one.
        if gpu_option is None or not gpu_option.startswith("--gres"):
            return None
        return "nothing: this profile asks for GPUs with --gres, and a second line replaces it"
    return hpctrain_spelling(option)


def _instead(spelling: str) -> str:
    """`use --gpus 4 instead`; `drop it: ...` where hpctrain's answer is nothing."""
    if spelling.startswith("nothing"):
        return "drop it" + spelling.removeprefix("nothing")
    return f"use {spelling} instead"


def _other_gres(option: SbatchArg) -> bool:
    """--gres for something other than GPUs (nvme:1), which stands beside --gpus-per-node."""
    return option.name == "gres" and "gpu" not in (option.value or "gpu")


def _normal(arg: str) -> str:
    """sbatch's long form for an option written short or with a space (`-b now`)."""
    option = parse_arg(arg)
    if option.name is None or not (arg[1] != "-" or " " in arg.split("=", 1)[0]):
        return arg
    if option.value is None:
        return option.flag
    return f"{option.flag}={option.value}"


def shell_options(req: JobRequest, given: set[str], gpu_option: str | None,
                  trainer: bool) -> Outcome[tuple[str, ...]]:
    """The shell's SBATCH_* variables as #SBATCH lines: what hpctrain decides is refused
    (sbatch would let the variable override the script), the rest is written out, where
    the profile or an --sbatch-arg does not already set it."""
    lines: list[str] = []
    problems: list[str] = []
    notes: list[str] = []
    for var, value in sorted(req.shell.items()):
        name = INPUT_VARIABLES.get(var)
        option = _variable_option(name, value) if name else None
        if var in SHELL_DEFAULTS or (name and option is None):
            continue  # a rule's default; or a flag set to "no", which sbatch leaves off too
        said = f"{var}={value} is set in your shell"
        if option is None:
            problems.append(f"{said}, and sbatch may read it as an option that hpctrain cannot "
                            "write into the script: unset it (or pass the option with "
                            "--sbatch-arg)")
            continue
        parsed = parse_arg(option)
        if parsed.name in ("partition", "job-name"):
            found = _named(req, var, parsed)
            problems += found.problems
            notes += found.notes
            continue
        clash = _shell_clash(parsed, gpu_option, trainer)
        if clash:
            problems.append(f"{said}, and sbatch would let it override the script: unset "
                            f"{var}; {clash}")
        elif CONTROL.search(value):
            problems.append(f"{var} contains a control character; unset it")
        elif parsed.flag in given:
            notes.append(f"{var} left out: the profile or --sbatch-arg sets {parsed.flag}")
        else:
            lines.append(option)
            notes.append(f"{option} from {var} in your shell")
    return Outcome(tuple(lines), tuple(problems), notes=tuple(notes))


def _variable_option(name: str, value: str) -> str | None:
    """The #SBATCH option a variable stands for; None for a flag it turns off (sbatch(1):
    empty, 'yes' or a non-zero number turn a flag on)."""
    if takes_value(name):
        return f"--{name}={value}"
    if name == "exclusive" and value in ("user", "mcs", "topo"):
        return f"--exclusive={value}"
    on = value in ("", "yes") or (value.isdigit() and int(value) != 0)
    return f"--{name}" if on else None


def _shell_clash(option: SbatchArg, gpu_option: str | None, trainer: bool) -> str | None:
    """The fix for a shell variable that stands for an option hpctrain decides."""
    if option.name in _TRAINER_ONLY:
        if not trainer:
            return None
        return f"hpctrain sets it for the packaged trainer ({_SPELLING[str(option.name)]})"
    spelling = _clash(option, gpu_option)
    return f"hpctrain's spelling: {spelling}" if spelling else None


def _named(req: JobRequest, var: str, option: SbatchArg) -> Outcome[None]:
    """SBATCH_PARTITION and SBATCH_JOB_NAME: a note where the job names its own, else refused
    (the partition and the job's name are chosen before the plan is made)."""
    if option.name == "partition":
        chosen, default = req.partition, req.profile.default_partition.name
    else:
        # A job name of "hpctrain" is --job-name's default: not told from one given.
        chosen, default = (None if req.job_name == "hpctrain" else req.job_name), "hpctrain"
    if option.value == (chosen or default):
        return Outcome(None)
    if chosen is not None:
        return Outcome(None, notes=(f"{var}={option.value} left out: the job has "
                                    f"{option.flag} {chosen}",))
    return Outcome(None, problems=(
        f"{var}={option.value} is set in your shell, and sbatch would let it override the "
        f"script's {option.flag} {default}: use {option.flag} {option.value} to mean it, or "
        f"unset {var}",))


@dataclass(frozen=True)
class Asked:
    """An option's value (None: neither given nor in the shell), what gave it, for messages
    (`--time`, `SBATCH_TIMELIMIT (your shell)`), and the notes that says."""

    value: str | None
    by: str
    notes: tuple[str, ...]


def asked(given: str | None, flag: str, shell: Mapping[str, str], var: str) -> Asked:
    """The option as given, else the shell's variable for it (SHELL_DEFAULTS); an empty
    variable counts as unset, as for sbatch."""
    found = shell.get(var) or None
    if given is not None:
        left = f"{var}={found} left out: the job has {flag} {given}"
        return Asked(given, flag, (left,) if found and found != given else ())
    if found is not None:
        return Asked(found, f"{var} (your shell)", (f"{flag} {found} from {var} in your shell",))
    return Asked(None, "", ())


def _conflicts(option_names: set[str]) -> list[str]:
    problems: list[str] = []
    for group, why in _EXCLUSIVE:
        hit = sorted(group & option_names)
        if len(hit) > 1:
            problems.append(f"{' and '.join(hit)} conflict: {why}")
    if "--hint" in option_names:
        clash = sorted(_HINT_CONFLICTS & option_names)
        if clash:
            problems.append(
                f"--hint with {', '.join(clash)}: SLURM silently ignores --hint; keep one"
            )
    return problems


def _gpu_option(profile: Profile, fit: Fit, gpus_per_node: int) -> str | None:
    """How this cluster wants GPUs asked for; None when the nodes cannot give them."""
    if not 0 < gpus_per_node <= min(t.gpus for t in fit.types):
        return None
    if profile.gpu_request == "gpus_per_node":
        return f"--gpus-per-node={gpus_per_node}"
    # Fitting types with different GPU models (Gilbreth's training: A100 and H100) leave the
    # model to the constraint: a typed request would rule one of them out.
    if profile.gpu_request == "gres_typed" and fit.gpu_type:
        return f"--gres=gpu:{fit.gpu_type}:{gpus_per_node}"
    return f"--gres=gpu:{gpus_per_node}"
