"""A launcher at the front of the user's command (plan/launch_lines.py): each tutorial's launch
line pasted after `--` gives a job with the right ranks and world size; torchrun, srun, python -m
torch.distributed.run/launch, accelerate, deepspeed and mpirun are adopted or refused with a
command that, given instead, is accepted."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest

from hpctrain.errors import PlanError
from hpctrain.plan import JobPlan, JobRequest, build_plan
from hpctrain.plan.launch_front import read_front
from hpctrain.plan.launch_lines import adopt_launch_line
from hpctrain.plan.launchers import LAUNCHERS
from hpctrain.profiles import load_profile
from hpctrain.render.script import render_script

RAVEN_ARGS = ("--max_epochs", "50", "--batch_size", "32", "--output_dir", "outputs")
TORCHRUN_003 = ("--rdzv_backend=c10d", "train_distributed.py", "--epochs", "10",
                "--batch-size", "64")
MARVIN = {"account": "ag_example"}


def plan(profile: str, command: tuple[str, ...], **kw: Any) -> JobPlan:
    return build_plan(JobRequest(profile=load_profile(profile), command=command, **kw))


def refused(profile: str, command: tuple[str, ...], **kw: Any) -> str:
    with pytest.raises(PlanError) as e:
        plan(profile, command, **kw)
    return str(e.value)


def world(p: JobPlan) -> int:
    """Training processes the job starts: every launcher's workers on every node."""
    return p.nodes * LAUNCHERS[p.launcher].workers_per_node(p.gpus_per_node)


def ranks_started(p: JobPlan) -> int:
    """Processes that actually start: SLURM's tasks, each with its launcher's workers."""
    mode = LAUNCHERS[p.launcher]
    return p.nodes * p.tasks_per_node * mode.workers_per_task(p.gpus_per_node)


# The tutorials' launch lines, pasted as each shows it (docs/tutorials.md), for its profile:
# (id, profile, hpctrain options, pasted line, launcher, tasks per node, command, world size).
TUTORIALS: list[tuple[str, str, dict[str, Any], tuple[str, ...], str, int, tuple[str, ...],
                      int]] = [
    ("000-single_gpu", "raven", {"gpus_per_node": 1},
     ("srun", "python", "src/train.py", *RAVEN_ARGS), "srun", 1,
     ("python", "src/train.py", *RAVEN_ARGS), 1),
    ("000-multi_gpu_single_node", "raven", {"gpus_per_node": 4},
     ("srun", "python", "src/train.py", *RAVEN_ARGS), "srun", 4,
     ("python", "src/train.py", *RAVEN_ARGS), 4),
    ("000-multi_node_multi_gpu", "raven", {"nodes": 2},
     ("srun", "python", "src/train.py", *RAVEN_ARGS), "srun", 4,
     ("python", "src/train.py", *RAVEN_ARGS), 8),
    ("002-gpu_bw", "raven", {"nodes": 2, "constraint": "gpu-bw"},
     ("srun", "python", "src/train.py", "--batch_size", "64"), "srun", 4,
     ("python", "src/train.py", "--batch_size", "64"), 8),
    ("001-single_node_4gpu", "gilbreth",
     {"account": "lab", "partition": "a100-80gb", "gpus_per_node": 4, "launcher": "per-node"},
     ("python", "train.py", "--config", "n1_gpu4.yaml"), "per-node", 1,
     ("python", "train.py", "--config", "n1_gpu4.yaml"), 4),
    ("001-multi_node_4x1", "gilbreth",
     {"account": "lab", "partition": "a100-80gb", "nodes": 4, "gpus_per_node": 1},
     ("python", "train.py", "--config", "n4_gpu1.yaml"), "srun", 1,
     ("python", "train.py", "--config", "n4_gpu1.yaml"), 4),
    # 003's line as its script has it, the variables left for the job to expand ...
    ("003-torchrun", "marvin", {**MARVIN, "partition": "mlgpu_short", "nodes": 4},
     ("srun", "torchrun", "--nnodes=$SLURM_JOB_NUM_NODES", "--nproc_per_node=8",
      "--rdzv_endpoint=$MASTER_ADDR:29500", *TORCHRUN_003), "torchrun", 1,
     ("python", *TORCHRUN_003[1:]), 32),
    # ... and as a login shell pastes it: the variables expanded there, empty.
    ("003-torchrun-expanded", "marvin",
     {**MARVIN, "partition": "mlgpu_short", "nodes": 4, "gpus_per_node": 8},
     ("srun", "torchrun", "--nnodes=", "--nproc_per_node=8", "--rdzv_endpoint=:29500",
      *TORCHRUN_003), "torchrun", 1, ("python", *TORCHRUN_003[1:]), 32),
    ("004-ddp_1node", "marvin",
     {**MARVIN, "partition": "sgpu_devel", "gpus_per_node": 2, "launcher": "per-node"},
     ("python", "Scripts/MNIST.py"), "per-node", 1, ("python", "Scripts/MNIST.py"), 2),
    ("004-ddp_2nodes", "marvin",
     {**MARVIN, "partition": "sgpu_devel", "nodes": 2, "launcher": "per-node"},
     ("python", "Scripts/MNIST.py"), "per-node", 1, ("python", "Scripts/MNIST.py"), 8),
]


@pytest.mark.parametrize(("profile", "options", "pasted", "launcher", "tasks", "command",
                          "size"), [t[1:] for t in TUTORIALS], ids=[t[0] for t in TUTORIALS])
def test_each_tutorials_pasted_line_gives_its_ranks(
    profile: str, options: dict[str, Any], pasted: tuple[str, ...], launcher: str, tasks: int,
    command: tuple[str, ...], size: int
) -> None:
    p = plan(profile, pasted, **options)
    assert (p.launcher, p.tasks_per_node, p.command) == (launcher, tasks, command)
    assert world(p) == ranks_started(p) == size


def test_the_torchrun_tutorial_renders_one_torchrun_per_node() -> None:
    p = plan("marvin", TUTORIALS[6][3], **TUTORIALS[6][2])
    script = render_script(p)
    launch = script[script.index("srun --kill-on-bad-exit=1 --ntasks-per-node=1 sh -c"):]
    assert launch.count("exec torchrun") == 1 and "--nproc-per-node=8" in launch
    assert launch.count(" torchrun") == 1
    assert "train_distributed.py --epochs 10" in launch and "29500" not in launch
    assert "#SBATCH --ntasks-per-node=1" in script
    assert any("dropped '--rdzv_endpoint=$MASTER_ADDR:29500', --rdzv_backend=c10d" in n
               for n in p.notes), p.notes


# The two cases


def test_a_pasted_torchrun_is_one_per_node_not_one_per_gpu() -> None:
    # It was srun with 4 tasks per node: eight torchruns each starting four workers.
    p = plan("raven", ("torchrun", "--nproc_per_node", "4", "train.py"), nodes=2)
    assert (p.launcher, p.tasks_per_node, p.command) == ("torchrun", 1, ("python", "train.py"))
    assert world(p) == ranks_started(p) == 8


def test_launcher_torchrun_and_a_torchrun_command_adopt_it_once() -> None:
    p = plan("raven", ("torchrun", "--nproc_per_node", "4", "--nnodes", "2", "--rdzv_endpoint",
                       "host:1", "--master_port=5", "--node_rank", "0", "train.py", "--lr", "1"),
             nodes=2, launcher="torchrun")
    assert p.command == ("python", "train.py", "--lr", "1")
    launch = render_script(p).split("# torchrun: one task per node")[1]
    assert launch.count("exec torchrun") == 1 and launch.count(" torchrun") == 1
    assert "host:1" not in launch and "node_rank" not in launch
    assert "dropped --rdzv_endpoint host:1, --master_port=5, --node_rank 0" in p.notes[0]


# Each form of launcher


@pytest.mark.parametrize("pasted", [
    ("/usr/bin/torchrun", "--nproc-per-node=2", "train.py"),
    ("python", "-m", "torch.distributed.run", "--nproc_per_node", "2", "train.py"),
    ("python3", "-m", "torch.distributed.launch", "--use_env", "--nproc_per_node", "2",
     "train.py"),
    ("env", "NCCL_DEBUG=INFO", "torchrun", "--nproc_per_node", "2", "train.py"),
    ("srun", "--ntasks-per-node=1", "torchrun", "--standalone", "--nproc_per_node=2",
     "train.py"),
])
def test_torchrun_forms_are_adopted(pasted: tuple[str, ...]) -> None:
    p = plan("raven", pasted)
    assert (p.launcher, p.gpus_per_node, p.tasks_per_node) == ("torchrun", 2, 1)
    assert p.command == ("python", "train.py") and world(p) == 2


def test_torchrun_module_and_no_python_keep_their_program() -> None:
    p = plan("local", ("torchrun", "-m", "pkg.train", "--lr", "1"))
    assert p.command == ("python", "-m", "pkg.train", "--lr", "1")
    assert "-m pkg.train --lr 1" in render_script(p)
    p = plan("local", ("torchrun", "--no-python", "bash", "run.sh"))
    assert p.command == ("bash", "run.sh") and "--no-python bash run.sh" in render_script(p)


def test_env_in_front_becomes_the_jobs_environment() -> None:
    p = plan("local", ("env", "NCCL_DEBUG=INFO", "A=x y", "torchrun", "t.py"))
    assert ("NCCL_DEBUG", "INFO") in p.env and ("A", "x y") in p.env
    assert p.command == ("python", "t.py")
    assert "set twice" in refused("local", ("NCCL_DEBUG=WARN", "torchrun", "t.py"),
                                  env={"NCCL_DEBUG": "INFO"})
    assert "looks like a secret" in refused("local", ("env", "HF_TOKEN=abc", "torchrun", "t.py"))


def test_a_path_to_torchrun_is_noted() -> None:
    p = plan("local", (".venv/bin/torchrun", "t.py"))
    assert any("not .venv/bin/torchrun" in n for n in p.notes), p.notes


def test_srun_forms_are_adopted() -> None:
    p = plan("raven", ("srun", "-u", "--kill-on-bad-exit=1", "python", "x.py"), nodes=2)
    assert (p.launcher, p.command, p.tasks_per_node) == ("srun", ("python", "x.py"), 4)
    assert "dropped -u, --kill-on-bad-exit=1" in p.notes[0]
    p = plan("raven", ("srun", "-N", "2", "--ntasks-per-node", "4", "python", "x.py"), nodes=2)
    assert world(p) == ranks_started(p) == 8
    p = plan("raven", ("srun", "-n4", "python", "x.py"))
    assert (p.gpus_per_node, p.tasks_per_node) == (4, 4)


def test_torch_distributed_launch_without_use_env_is_refused() -> None:
    text = refused("local", ("python", "-m", "torch.distributed.launch", "--nproc_per_node=2",
                             "x.py"))
    assert "passes --local-rank" in text
    assert "`--launcher torchrun -- python x.py`" in text


def test_accelerate_on_one_node_runs_as_written_per_node() -> None:
    p = plan("local", ("accelerate", "launch", "--multi_gpu", "--num_processes", "2", "t.py"))
    assert (p.launcher, p.gpus_per_node, p.tasks_per_node) == ("per-node", 2, 1)
    assert p.command == ("accelerate", "launch", "--multi_gpu", "--num_processes", "2", "t.py")
    assert world(p) == 2


def test_deepspeed_on_one_node_runs_as_written_per_node() -> None:
    p = plan("local", ("deepspeed", "--num_gpus", "2", "t.py", "--deepspeed"))
    assert (p.launcher, p.gpus_per_node, p.command[0]) == ("per-node", 2, "deepspeed")


# Refusals, each with a fix that is accepted when given instead


def _fix(message: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The request options and command of the first `--launcher ... -- ...` in a message."""
    found = re.search(r"`((?:--env \S+ )*--launcher [^`]*)`", message)
    assert found, message
    words = shlex.split(found.group(1))
    split = words.index("--")
    options, command = words[:split], tuple(words[split + 1:])
    env = dict(v.split("=", 1) for k, v in zip(options, options[1:], strict=False) if k == "--env")
    return {"launcher": options[options.index("--launcher") + 1], "env": env}, command


REFUSED: list[tuple[str, str, dict[str, Any], tuple[str, ...], str]] = [
    ("mpirun", "raven", {"nodes": 2}, ("mpirun", "-np", "8", "python", "x.py"),
     "starts its own ranks"),
    ("mpiexec", "local", {}, ("mpiexec", "-n", "1", "python", "x; rm -rf ~"),
     "starts its own ranks"),
    ("accelerate-2-nodes", "raven", {"nodes": 2},
     ("accelerate", "launch", "--num_machines", "2", "--machine_rank", "0", "--mixed_precision",
      "fp16", "t.py", "--lr", "1"), "--machine_rank"),
    ("deepspeed-2-nodes", "raven", {"nodes": 2},
     ("deepspeed", "--num_nodes", "2", "--hostfile", "hosts", "t.py"), "ssh from a hostfile"),
    ("per-node-with-torchrun", "local", {"launcher": "per-node", "gpus_per_node": 2},
     ("torchrun", "--nproc_per_node", "2", "t.py"), "would start torchrun inside"),
    ("torchrun-with-srun", "local", {"launcher": "torchrun"}, ("srun", "python", "t.py"),
     "would start srun inside"),
    ("torchrun-tee", "local", {}, ("torchrun", "--tee", "3", "t.py"), "has no place for it"),
    ("srun-cpus", "local", {}, ("srun", "-c", "2", "python", "t.py"),
     "give hpctrain --cpus-per-task 2"),
]


@pytest.mark.parametrize(("profile", "options", "pasted", "why"), [r[1:] for r in REFUSED],
                         ids=[r[0] for r in REFUSED])
def test_refusals_say_what_to_use_and_it_is_accepted(
    profile: str, options: dict[str, Any], pasted: tuple[str, ...], why: str
) -> None:
    text = refused(profile, pasted, **options)
    assert why in text
    if "give hpctrain" in text:
        return
    fixed, command = _fix(text)
    p = plan(profile, command, **{**options, **fixed})
    assert p.command == command and read_front(command) is None
    assert world(p) == ranks_started(p)


def test_the_mpirun_fix_quotes_hostile_arguments() -> None:
    text = refused("local", ("mpirun", "python", "x; rm -rf ~", "$(id)"))
    assert "`--launcher srun -- python 'x; rm -rf ~' '$(id)'`" in text


def test_srun_in_front_of_torchrun_starts_it_once_per_node() -> None:
    text = refused("raven", ("srun", "--ntasks-per-node=4", "torchrun", "t.py"), nodes=2)
    assert "`--ntasks-per-node=4` in front of torchrun" in text


def test_unknown_torchrun_option_is_refused() -> None:
    text = refused("local", ("torchrun", "--frobnicate", "t.py"))
    assert "`--frobnicate`: an option of torchrun that hpctrain cannot read" in text
    text = refused("local", ("torchrun", "--nproc_per_node"))
    assert "(unknown, or without its value)" in text


def test_a_huge_node_count_is_shortened_in_the_message() -> None:
    req = JobRequest(profile=load_profile("local"), nodes=10**5000,
                     command=("srun", "-n", "3", "python", "x.py"))
    (problem,) = adopt_launch_line(req).problems
    assert "a number thousands of digits long" in problem


# Counts that contradict the topology


def test_nproc_per_node_against_gpus_per_node() -> None:
    text = refused("raven", ("torchrun", "--nproc_per_node", "4", "t.py"), gpus_per_node=2)
    assert "starts 4 process(es) on each node" in text and "use --gpus-per-node 4" in text
    assert plan("raven", ("torchrun", "--nproc_per_node", "4", "t.py"), gpus_per_node=4)


def test_nnodes_against_nodes() -> None:
    text = refused("raven", ("torchrun", "--nnodes", "2", "--nproc_per_node", "4", "t.py"))
    assert "asks for 2 node(s), but the job has 1; use --nodes 2" in text


def test_total_processes_against_the_topology() -> None:
    text = refused("raven", ("srun", "-n", "6", "python", "t.py"), nodes=2, gpus_per_node=4)
    assert "starts 6 process(es) in all" in text and "use --gpus-per-node 3" in text
    text = refused("raven", ("mpirun", "-np", "3", "python", "t.py"), nodes=2)
    assert "use --nodes 1 --gpus-per-node 3" in text


@pytest.mark.parametrize("value", ["1:4", "cpu", "0", "9" * 30])
def test_counts_hpctrain_cannot_run_are_refused(value: str) -> None:
    text = refused("local", ("torchrun", f"--nnodes={value}", "t.py"))
    assert "hpctrain runs a fixed number of processes" in text


@pytest.mark.parametrize("command", [
    ("python", "train.py"), ("env", "A=1", "python", "x.py"), ("python", "srun.py"),
    ("python", "-m", "pkg", "torchrun"), ("bash", "-c", "torchrun x.py"),
])
def test_commands_without_a_launcher_in_front_are_left_alone(command: tuple[str, ...]) -> None:
    assert read_front(command) is None
    assert plan("local", command).command == command
