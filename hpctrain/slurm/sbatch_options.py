"""sbatch's own vocabulary: its options, their short spellings, what each asks for, and the
environment variables it reads as options (sbatch(1) of 22.05, with the names 23.02 to 25.05
added). Pure data and one parser; the plan, the profiles and the client share them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

# Long options that take a value (`--name=value`, or `--name value` on sbatch's command line).
_VALUED = frozenset({
    "account", "acctg-freq", "array", "batch", "bb", "bbf", "begin", "chdir",
    "cluster-constraint", "clusters", "comment", "constraint", "container", "container-id",
    "core-spec", "cores-per-socket", "cpu-freq", "cpus-per-gpu", "cpus-per-task", "deadline",
    "delay-boot", "dependency", "distribution", "error", "exclude", "export", "export-file",
    "extra", "extra-node-info", "gid", "gpu-bind", "gpu-freq", "gpus", "gpus-per-node",
    "gpus-per-socket", "gpus-per-task", "gres", "gres-flags", "hint", "input", "job-name",
    "kill-on-invalid-dep", "licenses", "mail-type", "mail-user", "mcs-label", "mem",
    "mem-bind", "mem-per-cpu", "mem-per-gpu", "mincpus", "network", "nodefile", "nodelist",
    "nodes", "ntasks", "ntasks-per-core", "ntasks-per-gpu", "ntasks-per-node",
    "ntasks-per-socket", "open-mode", "output", "partition", "power", "prefer", "priority",
    "profile", "qos", "reservation", "resv-ports", "segment", "signal", "sockets-per-node",
    "switches", "thread-spec", "threads-per-core", "time", "time-min", "tmp", "tres-bind",
    "tres-per-task", "uid", "wait-all-nodes", "wckey", "wrap",
})
# Flags; a few take an optional value, which only `--name=value` gives them.
_FLAGS = frozenset({
    "contiguous", "exclusive", "get-user-env", "help", "hold", "ignore-pbs", "nice",
    "no-kill", "no-requeue", "oom-kill-step", "overcommit", "oversubscribe", "parsable",
    "propagate", "quiet", "reboot", "requeue", "spread-job", "test-only", "usage",
    "use-min-nodes", "verbose", "version", "wait",
})
LONG_OPTIONS = _VALUED | _FLAGS

# sbatch's one-letter spellings; those of flags take no value.
SHORT = {
    "A": "account", "a": "array", "B": "extra-node-info", "b": "begin", "C": "constraint",
    "c": "cpus-per-task", "D": "chdir", "d": "dependency", "e": "error", "F": "nodefile",
    "G": "gpus", "H": "hold", "h": "help", "i": "input", "J": "job-name", "k": "no-kill",
    "L": "licenses", "M": "clusters", "m": "distribution", "N": "nodes", "n": "ntasks",
    "O": "overcommit", "o": "output", "p": "partition", "Q": "quiet", "q": "qos",
    "S": "core-spec", "s": "oversubscribe", "t": "time", "V": "version", "v": "verbose",
    "W": "wait", "w": "nodelist", "x": "exclude",
}

# What each option asks SLURM for, where a job script decides it: a second spelling of the
# same thing (sbatch's -G beside --gres=gpu:4) makes SLURM refuse the job or quietly drop one.
ASKS_FOR = {
    "gpus": "gpus", "gpus-per-node": "gpus", "gpus-per-task": "gpus",
    "gpus-per-socket": "gpus", "gres": "gpus", "tres-per-task": "cpus",
    "ntasks": "tasks", "ntasks-per-node": "tasks", "ntasks-per-gpu": "tasks",
    "cpus-per-task": "cpus", "cpus-per-gpu": "cpus", "mincpus": "cpus",
    "mem": "memory", "mem-per-cpu": "memory", "mem-per-gpu": "memory",
    "nodes": "nodes", "partition": "partition", "qos": "qos", "time": "time",
    "account": "account", "job-name": "job name", "constraint": "constraint",
    "output": "logs", "error": "logs", "input": "logs", "chdir": "logs",
    "dependency": "dependency", "array": "array", "signal": "restart",
    "requeue": "restart", "no-requeue": "restart", "open-mode": "restart",
    "clusters": "cluster", "wait": "waiting", "test-only": "waiting", "parsable": "waiting",
    "wrap": "script", "help": "script", "usage": "script", "version": "script",
}

# sbatch's input environment variables: each stands for the option named ("": for part of
# one, SBATCH_WAIT4SWITCH being --switches' time after its @). "Environment
# variables will override any options set in a batch script" (sbatch(1)), so each one set in
# the submitting shell silently changes the job a script describes.
INPUT_VARIABLES = {
    "SBATCH_ACCOUNT": "account", "SBATCH_ACCTG_FREQ": "acctg-freq",
    "SBATCH_ARRAY_INX": "array", "SBATCH_BATCH": "batch", "SBATCH_CLUSTERS": "clusters",
    "SLURM_CLUSTERS": "clusters", "SBATCH_CONSTRAINT": "constraint",
    "SBATCH_CONTAINER": "container", "SBATCH_CONTAINER_ID": "container-id",
    "SBATCH_CORE_SPEC": "core-spec", "SBATCH_CPUS_PER_GPU": "cpus-per-gpu",
    "SBATCH_CPUS_PER_TASK": "cpus-per-task", "SBATCH_DEBUG": "verbose",
    "SBATCH_DELAY_BOOT": "delay-boot", "SBATCH_DISTRIBUTION": "distribution",
    "SBATCH_ERROR": "error", "SBATCH_EXCLUSIVE": "exclusive", "SBATCH_EXPORT": "export",
    "SBATCH_GET_USER_ENV": "get-user-env", "SBATCH_GPU_BIND": "gpu-bind",
    "SBATCH_GPU_FREQ": "gpu-freq", "SBATCH_GPUS": "gpus",
    "SBATCH_GPUS_PER_NODE": "gpus-per-node", "SBATCH_GPUS_PER_TASK": "gpus-per-task",
    "SBATCH_GRES": "gres", "SBATCH_GRES_FLAGS": "gres-flags", "SBATCH_HINT": "hint",
    "SLURM_HINT": "hint", "SBATCH_IGNORE_PBS": "ignore-pbs", "SBATCH_INPUT": "input",
    "SBATCH_JOB_NAME": "job-name", "SBATCH_MEM_BIND": "mem-bind",
    "SBATCH_MEM_PER_CPU": "mem-per-cpu", "SBATCH_MEM_PER_GPU": "mem-per-gpu",
    "SBATCH_MEM_PER_NODE": "mem", "SBATCH_NETWORK": "network", "SBATCH_NO_KILL": "no-kill",
    "SBATCH_NO_REQUEUE": "no-requeue", "SBATCH_OPEN_MODE": "open-mode",
    "SBATCH_OUTPUT": "output", "SBATCH_OVERCOMMIT": "overcommit",
    "SBATCH_PARTITION": "partition", "SBATCH_POWER": "power", "SBATCH_PROFILE": "profile",
    "SBATCH_QOS": "qos", "SBATCH_REQ_SWITCH": "switches", "SBATCH_REQUEUE": "requeue",
    "SBATCH_RESERVATION": "reservation", "SBATCH_SEGMENT_SIZE": "segment",
    "SBATCH_SIGNAL": "signal", "SBATCH_SPREAD_JOB": "spread-job",
    "SBATCH_THREAD_SPEC": "thread-spec", "SBATCH_THREADS_PER_CORE": "threads-per-core",
    "SBATCH_TIMELIMIT": "time", "SBATCH_TRES_BIND": "tres-bind",
    "SBATCH_TRES_PER_TASK": "tres-per-task", "SBATCH_USE_MIN_NODES": "use-min-nodes",
    "SBATCH_WAIT": "wait", "SBATCH_WAIT_ALL_NODES": "wait-all-nodes",
    "SBATCH_WAIT4SWITCH": "", "SBATCH_WCKEY": "wckey",
}
# Whatever a newer SLURM adds, sbatch reads only this namespace (and the SLURM_ names above).
INPUT_PREFIX = "SBATCH_"

_WORD = re.compile(r"\s+")


@dataclass(frozen=True)
class SbatchArg:
    """One sbatch option as written: its long name (None: not sbatch's), the spelling used,
    and its value (None: none given)."""

    name: str | None
    spelling: str
    value: str | None

    @property
    def flag(self) -> str:
        """The option in sbatch's long form, `--gpus`; the spelling when it is not sbatch's."""
        return f"--{self.name}" if self.name else self.spelling


def long_name(word: str) -> str | None:
    """sbatch's name for `--word` or a unique prefix of it (getopt_long takes `--part`)."""
    if word in LONG_OPTIONS:
        return word
    found = [n for n in LONG_OPTIONS if n.startswith(word)] if word else []
    return found[0] if len(found) == 1 else None


def parse_arg(arg: str) -> SbatchArg:
    """`--gpus=4`, `--gpus 4`, `-G4`, `-G 4`, `-G=4` -> (gpus, 4); the name None when
    sbatch has no such option."""
    if arg.startswith("--"):
        head, sep, value = arg[2:].partition("=")
        if not sep:
            head, _, rest = head.partition(" ")
            value = rest.strip()
        name = long_name(head)
        return SbatchArg(name, f"--{head}", value if (sep or value) else None)
    letter = arg[1:2] if arg.startswith("-") else ""
    value = arg[2:].lstrip(" =")
    return SbatchArg(SHORT.get(letter), f"-{letter}" if letter else arg, value or None)


def is_sbatch_option(word: str) -> bool:
    """True for a spelling sbatch knows: `-G`, `--gres`, `--mail-type` (not `--profle`)."""
    if word.startswith("--"):
        return word[2:] in LONG_OPTIONS
    return len(word) == 2 and word[0] == "-" and word[1] in SHORT


def takes_value(name: str) -> bool:
    """Whether sbatch's option `name` (long form, no dashes) takes a value of its own."""
    return name in _VALUED


def more_options(arg: str) -> bool:
    """True when one argument holds several options (`-G 4 -c 8`): sbatch reads one."""
    words = _WORD.split(arg.strip())
    return any(is_sbatch_option(w.split("=", 1)[0]) for w in words[1:])


# What an enclosing job (submitting from inside salloc or a batch script) keeps for sbatch:
# its configuration and credentials. Its other SLURM_ variables describe that job; exported
# into the new one, srun there reads them (SLURM_MEM_PER_CPU beside the new job's
# SLURM_MEM_PER_NODE is fatal to srun).
_KEPT_IN_A_JOB = frozenset({"SLURM_CONF", "SLURM_JWT", "SLURM_DEBUG_FLAGS", "SLURM_EXIT_ERROR",
                            "SLURM_UMASK", "SLURM_TIME_FORMAT"})


def reads_as_option(name: str) -> bool:
    """True for a variable sbatch reads as one of its options (SBATCH_TIMELIMIT, SLURM_HINT)."""
    return name.startswith(INPUT_PREFIX) or name in INPUT_VARIABLES


def sbatch_environment(env: Mapping[str, str]) -> dict[str, str]:
    """`env` as sbatch should see it: nothing that overrides the script's #SBATCH lines, and
    none of an enclosing job's description."""
    in_a_job = "SLURM_JOB_ID" in env or "SLURM_JOBID" in env
    return {k: v for k, v in env.items()
            if not reads_as_option(k)
            and not (in_a_job and k.startswith("SLURM_") and k not in _KEPT_IN_A_JOB)}


def input_variables(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of `env` that sbatch would read as options: the CLI hands them to the plan."""
    return {k: v for k, v in env.items() if reads_as_option(k)}
