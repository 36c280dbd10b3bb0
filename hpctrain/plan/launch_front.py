"""The launcher at the front of a command, read: which one, its options and what they mean.

The launchers hpctrain recognises (torchrun, torch.distributed.launch, srun, accelerate,
deepspeed, mpirun) with the role of each option, the command's front parsed into them, and
the process counts such a line asks for or is given (plan/launch_lines.py adopts or refuses it).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hpctrain.plan.model import Launcher

# What a launcher's option means for the job. A role starting with "--" names the hpctrain
# option that asks for the same resource.
NODES, PER_NODE, TOTAL = "nodes", "per-node", "total"  # process counts: checked
RENDEZVOUS = "rendezvous"  # the job sets it: dropped
STEP = "step"  # output and binding of an srun step that hpctrain writes itself: dropped
MODULE, NO_PYTHON, USE_ENV = "module", "no-python", "use-env"  # how the program is started
KEPT = "kept"  # the launcher runs as written, with it
UNSUPPORTED = "unsupported"  # hpctrain's line has no place for it: refused
COUNTS = (NODES, PER_NODE, TOTAL)


@dataclass(frozen=True)
class Tool:
    """A launcher hpctrain recognises, and what its options mean."""

    name: str
    # The hpctrain launcher that starts the program the same way (None: refused).
    adopt_as: Launcher | None
    values: Mapping[str, str]
    switches: Mapping[str, str]
    # It runs as written under per-node (it starts the node's workers itself).
    as_written: bool = False


_TORCHRUN_VALUES = {
    "--nnodes": NODES, "--nproc-per-node": PER_NODE,
    **dict.fromkeys(("--rdzv-backend", "--rdzv-endpoint", "--rdzv-id", "--rdzv-conf",
                     "--master-addr", "--master-port", "--node-rank", "--local-addr"), RENDEZVOUS),
    **dict.fromkeys(("--max-restarts", "--monitor-interval", "--start-method", "--role",
                     "--log-dir", "-r", "--redirects", "-t", "--tee", "--local-ranks-filter",
                     "--logs-specs"), UNSUPPORTED),
}
_TORCHRUN_SWITCHES = {"--standalone": RENDEZVOUS, "--no-python": NO_PYTHON, "-m": MODULE,
                      "--module": MODULE, "--run-path": UNSUPPORTED}
TORCHRUN = Tool("torchrun", "torchrun", _TORCHRUN_VALUES, _TORCHRUN_SWITCHES)
TORCH_LAUNCH = Tool("torch.distributed.launch", "torchrun", _TORCHRUN_VALUES,
                    {**_TORCHRUN_SWITCHES, "--use-env": USE_ENV})
SRUN = Tool("srun", "srun", {
    "-N": NODES, "--nodes": NODES, "-n": TOTAL, "--ntasks": TOTAL, "--ntasks-per-node": PER_NODE,
    "--mpi": STEP, "--cpu-bind": STEP, "--export": STEP,
    "-c": "--cpus-per-task", "--cpus-per-task": "--cpus-per-task", "--mem": "--mem",
    "-t": "--time", "--time": "--time", "-p": "--partition", "--partition": "--partition",
    "-A": "--account", "--account": "--account", "-q": "--qos", "--qos": "--qos",
    "-C": "--constraint", "--constraint": "--constraint", "-J": "--job-name",
    "--job-name": "--job-name", "--gpus-per-node": "--gpus-per-node", "--gres": "--gpus-per-node",
    "-G": "--gpus", "--gpus": "--gpus",
}, {"-u": STEP, "--unbuffered": STEP, "-l": STEP, "--label": STEP, "-K": STEP,
    "--kill-on-bad-exit": STEP})
ACCELERATE = Tool("accelerate launch", "per-node", {
    "--num-processes": TOTAL, "--num-machines": NODES,
    **dict.fromkeys(("--machine-rank", "--main-process-ip", "--main-process-port",
                     "--rdzv-backend"), RENDEZVOUS),
    **dict.fromkeys(("--config-file", "--mixed-precision", "--gpu-ids", "--dynamo-backend",
                     "--num-cpu-threads-per-process", "--gradient-accumulation-steps",
                     "--deepspeed-config-file", "--zero-stage", "--max-restarts",
                     "--monitor-interval"), KEPT),
}, {"--same-network": RENDEZVOUS, **dict.fromkeys(
    ("--multi-gpu", "--cpu", "--use-deepspeed", "--use-fsdp", "-m", "--module", "--no-python",
     "-q", "--quiet", "--debug"), KEPT)}, as_written=True)
DEEPSPEED = Tool("deepspeed", "per-node", {
    "--num-nodes": NODES, "--num-gpus": PER_NODE,
    **dict.fromkeys(("--master-addr", "--master-port", "--node-rank"), RENDEZVOUS),
    # Its multi-node launch: a hostfile and ssh (pdsh) to the other nodes.
    **dict.fromkeys(("-H", "--hostfile", "-i", "--include", "-e", "--exclude", "--launcher",
                     "--launcher-args", "--ssh-port"), UNSUPPORTED),
    **dict.fromkeys(("--autotuning", "--enable-each-rank-log"), KEPT),
}, {"--no-python": NO_PYTHON, "--module": MODULE, "--force-multi": UNSUPPORTED,
    "--no-ssh": UNSUPPORTED, **dict.fromkeys(("--no-local-rank", "--no-ssh-check", "--save-pid",
                                              "--bind-cores-to-rank", "--elastic-training"),
                                             KEPT)}, as_written=True)
MPIRUN = Tool("mpirun", None, {
    "-np": TOTAL, "--np": TOTAL, "-n": TOTAL, "-c": TOTAL, "-N": PER_NODE, "--npernode": PER_NODE,
    "-npernode": PER_NODE, "-ppn": PER_NODE,
    **dict.fromkeys(("--map-by", "-map-by", "--bind-to", "-bind-to", "-x", "-H", "--host",
                     "-host", "--hostfile", "-hostfile", "-f", "-machinefile"), KEPT),
}, dict.fromkeys(("--oversubscribe", "-oversubscribe", "--allow-run-as-root", "--tag-output",
                  "-tag-output"), KEPT), as_written=True)

_COMMANDS = {"srun": SRUN, "torchrun": TORCHRUN, "deepspeed": DEEPSPEED, "mpirun": MPIRUN,
             "mpiexec": MPIRUN, "orterun": MPIRUN}
_MODULES = {"torch.distributed.run": TORCHRUN, "torch.distributed.launch": TORCH_LAUNCH,
            "accelerate.commands.launch": ACCELERATE, "deepspeed.launcher.runner": DEEPSPEED}
_PYTHON = re.compile(r"(.*/)?python[0-9.]*")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
# Counts that mean "the job's own": a variable the job sets (the shell that pasted
# `$SLURM_JOB_NUM_NODES` on a login node may also have left it empty), torchrun's auto and gpu.
_JOBS_OWN = re.compile(r"(|auto|gpu|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)")


@dataclass(frozen=True)
class Option:
    """One option of a launcher, as written and as understood."""

    written: tuple[str, ...]
    name: str
    value: str | None
    role: str

    @property
    def shown(self) -> str:
        """The option as the user wrote it."""
        return shlex.join(self.written)


@dataclass(frozen=True)
class Line:
    """A launcher, its options, and what it starts (from its first word that is no option)."""

    tool: Tool
    written: tuple[str, ...]
    options: tuple[Option, ...]
    rest: tuple[str, ...]
    # An option the table does not know: where its program starts is unknown (rest starts here).
    unknown: str | None = None

    @property
    def words(self) -> tuple[str, ...]:
        """The launcher as written, with its options and program."""
        return (*self.written, *(w for o in self.options for w in o.written), *self.rest)

    def roles(self, *roles: str) -> tuple[Option, ...]:
        """Its options with these roles."""
        return tuple(o for o in self.options if o.role in roles)


@dataclass(frozen=True)
class Front:
    """The front of a command: variables set for it, an srun around a launcher, the launcher."""

    env: tuple[tuple[str, str], ...]
    outer: Line | None
    line: Line


def read_front(command: Sequence[str]) -> Front | None:
    """The launcher the command starts with (after `env VAR=x`), or None."""
    words = tuple(command)
    start = 1 if words[:1] == ("env",) else 0
    env: list[tuple[str, str]] = []
    while start < len(words) and (found := _ASSIGNMENT.fullmatch(words[start])):
        env.append((found.group(1), found.group(2)))
        start += 1
    line = _line_at(words[start:])
    if line is None:
        return None
    if line.tool is SRUN and line.unknown is None:
        inner = _line_at(line.rest)
        if inner is not None and inner.tool is not SRUN:
            return Front(tuple(env), line, inner)
    return Front(tuple(env), None, line)


def _line_at(words: tuple[str, ...]) -> Line | None:
    if not words:
        return None
    if _PYTHON.fullmatch(words[0]) and len(words) > 2 and words[1] == "-m":
        tool, n = _MODULES.get(words[2]), 3
    elif posixpath.basename(words[0]) == "accelerate" and words[1:2] == ("launch",):
        tool, n = ACCELERATE, 2
    else:
        tool, n = _COMMANDS.get(posixpath.basename(words[0])), 1
    return None if tool is None else _parse(tool, words[:n], words[n:])


def _parse(tool: Tool, written: tuple[str, ...], words: tuple[str, ...]) -> Line:
    options: list[Option] = []
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        word = words[i]
        if word == "--":
            return Line(tool, written, tuple(options), words[i + 1:])
        name, eq, inline = word.partition("=")
        # torchrun, accelerate and deepspeed take --nproc_per_node and --nproc-per-node alike.
        name = name.replace("_", "-") if name.startswith("--") else name
        if name not in tool.values and name not in tool.switches and name[:2] in tool.values:
            name, eq, inline = name[:2], "=", word[2:]  # srun -n4, mpirun -N2
        if name in tool.switches:
            options.append(Option((word,), name, inline if eq else None, tool.switches[name]))
            i += 1
        elif name in tool.values and (eq or i + 1 < len(words)):
            used = (word,) if eq else (word, words[i + 1])
            options.append(Option(used, name, inline if eq else words[i + 1], tool.values[name]))
            i += len(used)
        else:
            return Line(tool, written, tuple(options), words[i:], unknown=word)
    return Line(tool, written, tuple(options), words[i:])


def program(line: Line) -> tuple[str, ...]:
    """The command the adopted launcher runs: the program, or the launcher itself (per-node)."""
    if line.tool.as_written:
        kept = (w for o in line.options if o.role != UNSUPPORTED for w in o.written)
        return (*line.written, *kept, *line.rest)
    if line.tool is SRUN:
        return line.rest
    if line.roles(NO_PYTHON):
        return line.rest
    # hpctrain's torchrun line drops `python` again and runs the script (or -m module) itself.
    return ("python", "-m", *line.rest) if line.roles(MODULE) else ("python", *line.rest)


def count_of(opt: Option) -> tuple[int | None, str | None]:
    """The count an option gives (None: the job's own), or why it is none."""
    value = (opt.value or "").strip()
    if _JOBS_OWN.fullmatch(value):
        return None, None
    low, _, high = value.partition(":")
    if re.fullmatch(r"[0-9]{1,9}", low) and high in ("", low) and int(low) > 0:
        return int(low), None
    return None, (f"`{opt.shown}`: hpctrain runs a fixed number of processes; give a number "
                  "(or drop it and size the job with --nodes and --gpus-per-node)")


def line_counts(command: Sequence[str], nodes: int
                ) -> tuple[int | None, int | None, int | None]:
    """The nodes, processes per node and processes in all a pasted launcher asks for (None:
    not given, or the job's own; per node also where its total does not split)."""
    front = read_front(command) if command else None
    if front is None:
        return None, None, None
    found: dict[str, int] = {}
    for opt in front.line.roles(*COUNTS):
        count = count_of(opt)[0]
        if count is not None:
            found[opt.role] = count
    line_nodes = found.get(NODES)
    per_node = found.get(PER_NODE)
    total = found.get(TOTAL)
    if per_node is None and total is not None and total % (line_nodes or nodes) == 0:
        per_node = total // (line_nodes or nodes)
    if total is None and per_node is not None:
        total = (line_nodes or nodes) * per_node
    return line_nodes, per_node, total


def with_counts(command: Sequence[str], nodes: int, gpus_per_node: int) -> tuple[str, ...]:
    """`command` with its pasted launcher's process counts set for a job of `nodes` x
    `gpus_per_node` (one process per GPU); counts it leaves to the job stay as written."""
    words = tuple(command)
    front = read_front(words)
    if front is None:
        return words
    line = front.line
    per_node = max(gpus_per_node, 1)
    wanted = {NODES: nodes, PER_NODE: per_node, TOTAL: nodes * per_node}
    out = list(words[:len(words) - len(line.words)]) + list(line.written)
    for opt in line.options:
        count = wanted.get(opt.role)
        out += opt.written if count is None or count_of(opt)[0] is None else _set(opt, count)
    return (*out, *line.rest)


def _set(opt: Option, count: int) -> tuple[str, ...]:
    """The option as written, with `count` as its value (--nproc_per_node=4, -n4, -n 4)."""
    if len(opt.written) == 2:
        return (opt.written[0], str(count))
    word = opt.written[0]
    if "=" in word:
        return (f"{word.split('=', 1)[0]}={count}",)
    return (f"{word[:len(opt.name)]}{count}",)
