"""Rules for the sbatch options: the GPU request, and the extra options users pass through."""

from __future__ import annotations

from dataclasses import dataclass

from hpctrain.plan.model import JobRequest
from hpctrain.plan.nodetypes import Fit
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.text import CONTROL
from hpctrain.profiles.model import Profile

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
    "--dependency": "--after JOBID or --chain N", "-d": "--after JOBID or --chain N",
}

# Options every script carries, whatever the request.
_EMITTED = frozenset({"--nodes", "--ntasks-per-node", "--cpus-per-task", "--mem", "--time"})

# Pairs SLURM refuses or silently mishandles
# (docs/cluster-facts.md, "Slurm 22.05+ rules for the validator").
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


@dataclass(frozen=True)
class SbatchOptions:
    """The GPU request option, if any, and the extra options after the plan's own."""

    gpu_option: str | None
    extra: tuple[str, ...]


def sbatch_option_name(arg: str) -> str:
    """`--mem-per-cpu=4G` -> `--mem-per-cpu`; `-c4` -> `-c`."""
    if arg.startswith("--"):
        return arg.split("=", 1)[0]
    return arg[:2]


def sbatch_options(req: JobRequest, fit: Fit, gpus_per_node: int) -> Outcome[SbatchOptions]:
    """The profile's and the user's extra options, refused where they clash with the plan's."""
    problems: list[str] = []
    extra: list[str] = list(req.profile.sbatch_defaults)
    for arg in req.sbatch_args:
        problem = _sbatch_arg_problem(arg)
        if problem:
            problems.append(problem)
        else:
            extra.append(arg)
    gpu_option = _gpu_option(req.profile, fit, gpus_per_node)
    names = {sbatch_option_name(a) for a in extra} | _EMITTED
    if gpu_option:
        names.add(sbatch_option_name(gpu_option))
    problems.extend(_conflicts(names))
    return Outcome(SbatchOptions(gpu_option, tuple(extra)), tuple(problems))


def _sbatch_arg_problem(arg: str) -> str | None:
    if CONTROL.search(arg):
        return f"--sbatch-arg {arg!r} contains a control character; remove it"
    if not arg.startswith("-") or arg in ("-", "--"):
        return (
            f"--sbatch-arg {arg!r} is not an sbatch option; pass one option per "
            "--sbatch-arg, e.g. --sbatch-arg=--mail-type=END"
        )
    name = sbatch_option_name(arg)
    if name in _MANAGED:
        return f"--sbatch-arg {arg} sets what hpctrain manages; use {_MANAGED[name]} instead"
    if arg.startswith("--") and " " in arg.split("=", 1)[0]:
        return f"--sbatch-arg {arg!r}: write it as --option=value"
    return None


def _conflicts(option_names: set[str]) -> list[str]:
    problems: list[str] = []
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
