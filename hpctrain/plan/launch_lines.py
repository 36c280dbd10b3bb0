"""A launcher at the front of the user's command: read into the job's own launch line, or refused.

hpctrain writes the job's launch line itself (templates/sbatch.sh.j2), so a launcher pasted in
front of the command would run inside it: `srun python x.py` under hpctrain's srun, one torchrun
per GPU, a torchrun inside torchrun. Instead its program runs under the hpctrain launcher that
does the same, its process counts must agree with the job's topology (or set the GPUs per node
when none were asked for), and its rendezvous is the job's. What hpctrain's lines cannot run
faithfully (mpirun; accelerate or deepspeed across nodes; torch.distributed.launch's
--local-rank argument) is refused with the command to use. docs/jobs.md, "A launcher in the
command".
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from hpctrain.plan.model import JobRequest, Launcher
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.text import number

# What a launcher's option means for the job. A role starting with "--" names the hpctrain
# option that asks for the same resource.
NODES, PER_NODE, TOTAL = "nodes", "per-node", "total"  # process counts: checked
RENDEZVOUS = "rendezvous"  # the job sets it: dropped
STEP = "step"  # output and binding of an srun step that hpctrain writes itself: dropped
MODULE, NO_PYTHON, USE_ENV = "module", "no-python", "use-env"  # how the program is started
KEPT = "kept"  # the launcher runs as written, with it
UNSUPPORTED = "unsupported"  # hpctrain's line has no place for it: refused
_COUNTS = (NODES, PER_NODE, TOTAL)


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


def adopt_launch_line(req: JobRequest) -> Outcome[JobRequest]:
    """The request with the launcher at the front of its command read into hpctrain's launcher,
    topology and environment; or why it cannot be, with the command to use."""
    front = read_front(req.command) if req.command else None
    if front is None:
        return Outcome(req)
    line, target = front.line, front.line.tool.adopt_as
    env, problems, notes = _moved_env(front, req)
    refusal = _refusal(front, req)
    gpus, count_problems, count_notes = _counts(front, req)
    if refusal or target is None:
        return Outcome(req, (*problems, *refusal, *count_problems))
    problems += [*count_problems, *_option_problems(front, req, target)]
    notes = [_adopted_note(front, req, target), *count_notes, *notes, *_path_notes(line, target)]
    adopted = replace(req, launcher=target, command=program(line), gpus_per_node=gpus, env=env)
    return Outcome(adopted, tuple(problems), notes=tuple(notes))


def _use(front: Front, launcher: str, command: Sequence[str]) -> str:
    """The options and command to give hpctrain instead, as one would type them."""
    env = "".join(f"--env {shlex.quote(f'{k}={v}')} " for k, v in front.env)
    return f"`{env}--launcher {launcher} -- {shlex.join(command)}`"


def _refusal(front: Front, req: JobRequest) -> tuple[str, ...]:
    """Why the line cannot be adopted as it is, with the command to use instead."""
    line = front.line
    shown = shlex.join(line.written)
    if not line.rest:
        return (f"`{shown}` at the front of the command starts nothing; give it the program to "
                "run, e.g. `-- " + shlex.join((*line.written, "train.py")) + "`",)
    if line.tool is MPIRUN:
        return (f"`{shown}` starts its own ranks over the job's nodes, beside hpctrain's launch "
                f"line; use {_use(front, 'srun', line.rest)}: one task per GPU, each with RANK, "
                "LOCAL_RANK, WORLD_SIZE and SLURM's variables (a program that reads "
                "OMPI_COMM_WORLD_RANK or PMI_RANK must read RANK instead)",)
    if line.tool is TORCH_LAUNCH and not line.roles(USE_ENV):
        return (f"`{shown}` passes --local-rank to each worker, and hpctrain's torchrun line "
                f"sets LOCAL_RANK instead (as its --use-env does); use "
                f"{_use(front, 'torchrun', program(line))} with a program that reads LOCAL_RANK",)
    if line.tool.as_written and req.nodes > 1:
        return (_across_nodes(front),)
    target = line.tool.adopt_as
    # srun is the default, so it is not taken for a choice against the command's launcher.
    if req.launcher in ("srun", target) or target is None:
        return ()
    also = (f"; or keep --launcher {req.launcher} and drop `{shown}`: "
            + _use(front, req.launcher, line.rest) if line.tool is SRUN else "")
    return (f"--launcher {req.launcher} with `{shown}` at the front of the command would start "
            f"{line.tool.name} inside hpctrain's {req.launcher} line; use "
            f"{_use(front, target, program(line))}{also}",)


def _across_nodes(front: Front) -> str:
    """accelerate or deepspeed on several nodes: the command that runs them there."""
    line = front.line
    rest = [w for o in line.roles(KEPT, MODULE, NO_PYTHON) for w in o.written] + list(line.rest)
    if line.tool is ACCELERATE:
        script = ("exec accelerate launch --num_machines \"$NNODES\" --machine_rank "
                  "\"$NODE_RANK\" --num_processes \"$WORLD_SIZE\" --main_process_ip "
                  "\"$MASTER_ADDR\" --main_process_port \"$MASTER_PORT\" \"$@\"")
        return ("accelerate launch needs each node's --machine_rank, which one command line "
                "for every node cannot hold; use "
                + _use(front, "per-node", ("sh", "-c", script, "accelerate", *rest))
                + ": the job sets NNODES, NODE_RANK, WORLD_SIZE and the master on each node")
    return ("deepspeed starts the other nodes over ssh from a hostfile; in a SLURM job use "
            + _use(front, "torchrun", program(replace(line, tool=TORCHRUN)))
            + ": one torchrun per node, whose variables deepspeed.init_distributed() reads "
            "(a program that takes --local_rank as an argument must read LOCAL_RANK instead)")


def _moved_env(front: Front, req: JobRequest) -> tuple[dict[str, str], list[str], list[str]]:
    """`env VAR=x` in front of the launcher becomes the job's --env VAR=x."""
    env = dict(req.env)
    problems: list[str] = []
    for key, value in front.env:
        if env.get(key, value) != value:
            problems.append(f"{key} is set twice: `{key}={value}` in front of the command and "
                            f"--env {key}={env[key]}; give it once")
        env[key] = value
    notes = [f"{', '.join(k for k, _ in front.env)} from the front of the command: exported by "
             "the job, as with --env"] if front.env else []
    return env, problems, notes


def _option_problems(front: Front, req: JobRequest, target: str) -> list[str]:
    """Options of the launcher (and of an srun around it) that hpctrain's line cannot take."""
    problems: list[str] = []
    fix = _use(front, target, program(front.line))
    for line in (front.outer, front.line):
        if line is None:
            continue
        if line.unknown is not None and not line.tool.as_written:
            problems.append(
                f"`{line.unknown}`: an option of {line.tool.name} that hpctrain cannot read "
                f"(unknown, or without its value), so where the program starts is unclear; "
                f"drop `{shlex.join(line.written)}` and its options: `--launcher {target} -- "
                "PROGRAM ARGS`")
        for opt in line.roles(UNSUPPORTED):
            problems.append(f"`{opt.shown}`: hpctrain's {target} line has no place for it; "
                            f"drop it: {fix}")
        for opt in (o for o in line.options if o.role.startswith("--")):
            value = (opt.value or "").rsplit(":", 1)[-1] if "gpu" in opt.role else opt.value
            problems.append(f"`{opt.shown}`: the job's resources are hpctrain's options; give "
                            f"hpctrain {opt.role} {shlex.quote(value or '')} instead")
    return problems


def _count(opt: Option) -> tuple[int | None, str | None]:
    """The count an option gives (None: the job's own), or why it is none."""
    value = (opt.value or "").strip()
    if _JOBS_OWN.fullmatch(value):
        return None, None
    low, _, high = value.partition(":")
    if re.fullmatch(r"[0-9]{1,9}", low) and high in ("", low) and int(low) > 0:
        return int(low), None
    return None, (f"`{opt.shown}`: hpctrain runs a fixed number of processes; give a number "
                  "(or drop it and size the job with --nodes and --gpus-per-node)")


def _counts(front: Front, req: JobRequest) -> tuple[int | None, list[str], list[str]]:
    """GPUs per node the line's counts set (when none were asked for), their problems, notes."""
    gpus, problems, notes = req.gpus_per_node, [], []
    nodes = max(req.nodes, 1)
    if front.outer is not None:
        problems += _outer_counts(front.outer, front.line.tool.name, nodes)
    for role in _COUNTS:
        for opt in front.line.roles(role):
            count, problem = _count(opt)
            if problem or count is None:
                problems += [problem] if problem else []
            elif role == NODES:
                if count != req.nodes:
                    problems.append(f"`{opt.shown}` asks for {number(count)} node(s), but the "
                                    f"job has {number(req.nodes)}; use --nodes {count}")
            else:
                per_node = count if role == PER_NODE else count // nodes
                if role == TOTAL and count % nodes:
                    problems.append(_count_misfit(opt, count, nodes, gpus))
                elif gpus is None:
                    gpus = per_node
                    notes.append(f"--gpus-per-node {gpus} from `{opt.shown}`: one process per GPU")
                elif per_node != max(gpus, 1):
                    problems.append(_count_misfit(opt, count, nodes, gpus))
    return gpus, problems, notes


def _count_misfit(opt: Option, count: int, nodes: int, gpus: int | None) -> str:
    """A process count the job's topology does not give, and the topology that would."""
    if opt.role == PER_NODE:
        return (f"`{opt.shown}` starts {number(count)} process(es) on each node, but the job "
                f"has {number(gpus or 0)} GPU(s) per node and hpctrain starts one process per "
                f"GPU; use "
                f"--gpus-per-node {count}")
    if count % nodes == 0:
        fix = f"--gpus-per-node {count // nodes}"
    else:
        fit = next(d for d in range(min(nodes, count, 4096), 0, -1) if count % d == 0)
        fix = f"--nodes {fit} --gpus-per-node {count // fit}"
    has = f"{number(nodes)} node(s)" + (f" x {number(gpus)} GPU(s)" if gpus is not None else "")
    return (f"`{opt.shown}` starts {number(count)} process(es) in all, but the job has {has} "
            f"and hpctrain starts one process per GPU; use {fix}")


def _outer_counts(outer: Line, inner: str, nodes: int) -> list[str]:
    """An srun around a launcher starts it once per node, as hpctrain's line does."""
    problems: list[str] = []
    for opt in outer.roles(*_COUNTS):
        count, problem = _count(opt)
        want = 1 if opt.role == PER_NODE else nodes
        if problem or (count is not None and count != want):
            problems.append(f"`{opt.shown}` in front of {inner}: hpctrain starts one {inner} "
                            f"on each of the job's {number(nodes)} node(s); drop it")
    return problems


def _adopted_note(front: Front, req: JobRequest, target: str) -> str:
    """What was adopted and what was dropped, for the plan's notes and the script's header."""
    line = front.line
    launcher = [w for ln in (front.outer, line) if ln is not None
                for w in (*ln.written, *(w for o in ln.options for w in o.written))]
    default = " (not the default srun)" if req.launcher != target else ""
    note = (f"`{shlex.join(launcher)}` at the front of the command is --launcher {target}"
            f"{default}: the job runs `{shlex.join(program(line))}`")
    dropped = [o.shown for o in line.roles(RENDEZVOUS)] if not line.tool.as_written else []
    if dropped:
        note += f"; dropped {', '.join(dropped)}: the job sets the rendezvous"
    steps = [o.shown for ln in (front.outer, line) if ln is not None for o in ln.roles(STEP)]
    if steps:
        note += f"; dropped {', '.join(steps)}: hpctrain writes the srun line"
    return note


def _path_notes(line: Line, target: str) -> list[str]:
    """A launcher named by its path is replaced by the one on the job's PATH."""
    if target != "torchrun" or "/" not in line.written[0]:
        return []
    return [f"hpctrain's torchrun line runs the torchrun on the job's PATH (its Python "
            f"environment), not {line.written[0]}"]


def line_counts(command: Sequence[str], nodes: int
                ) -> tuple[int | None, int | None, int | None]:
    """The nodes, processes per node and processes in all a pasted launcher asks for (None:
    not given, or the job's own; per node also where its total does not split)."""
    front = read_front(command) if command else None
    if front is None:
        return None, None, None
    found: dict[str, int] = {}
    for opt in front.line.roles(*_COUNTS):
        count = _count(opt)[0]
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
        out += opt.written if count is None or _count(opt)[0] is None else _set(opt, count)
    return (*out, *line.rest)


def _set(opt: Option, count: int) -> tuple[str, ...]:
    """The option as written, with `count` as its value (--nproc_per_node=4, -n4, -n 4)."""
    if len(opt.written) == 2:
        return (opt.written[0], str(count))
    word = opt.written[0]
    if "=" in word:
        return (f"{word.split('=', 1)[0]}={count}",)
    return (f"{word[:len(opt.name)]}{count}",)
