"""A launcher at the front of the user's command: read into the job's own launch line, or refused.

hpctrain writes the job's launch line itself (templates/sbatch.sh.j2), so a launcher pasted in
front of the command would run inside it: `srun python x.py` under hpctrain's srun, one torchrun
per GPU, a torchrun inside torchrun. Instead its program runs under the hpctrain launcher that
does the same, its process counts must agree with the job's topology (or set the GPUs per node
when none were asked for), and its rendezvous is the job's. What hpctrain's lines cannot run
faithfully (mpirun; accelerate or deepspeed across nodes; torch.distributed.launch's
--local-rank argument) is refused with the command to use. docs/jobs.md, "A launcher in the
command". The line itself is read by plan/launch_front.py.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import replace

from hpctrain.plan.launch_front import (
    ACCELERATE,
    COUNTS,
    KEPT,
    MODULE,
    MPIRUN,
    NO_PYTHON,
    NODES,
    PER_NODE,
    RENDEZVOUS,
    SRUN,
    STEP,
    TORCH_LAUNCH,
    TORCHRUN,
    TOTAL,
    UNSUPPORTED,
    USE_ENV,
    Front,
    Line,
    Option,
    count_of,
    program,
    read_front,
)
from hpctrain.plan.model import JobRequest
from hpctrain.plan.outcome import Outcome
from hpctrain.plan.text import number


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



def _counts(front: Front, req: JobRequest) -> tuple[int | None, list[str], list[str]]:
    """GPUs per node the line's counts set (when none were asked for), their problems, notes."""
    gpus, problems, notes = req.gpus_per_node, [], []
    nodes = max(req.nodes, 1)
    if front.outer is not None:
        problems += _outer_counts(front.outer, front.line.tool.name, nodes)
    for role in COUNTS:
        for opt in front.line.roles(role):
            count, problem = count_of(opt)
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
    for opt in outer.roles(*COUNTS):
        count, problem = count_of(opt)
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


