"""Every validator rule: what the cluster would refuse is refused, with the fix spelled out."""

from dataclasses import replace
from typing import Any

import pytest

from hpctrain.errors import PlanError
from hpctrain.plan import JobPlan, JobRequest, build_plan
from hpctrain.profiles import load_profile
from hpctrain.trainconfig.load import load_config


def plan(profile: str, **kw: Any) -> JobPlan:
    return build_plan(JobRequest(profile=load_profile(profile), **kw))


def refused(profile: str, **kw: Any) -> str:
    with pytest.raises(PlanError) as e:
        plan(profile, **kw)
    return str(e.value)


# Topologies and defaults


def test_raven_two_full_nodes() -> None:
    p = plan("raven", nodes=2)
    assert (p.nodes, p.gpus_per_node, p.tasks_per_node, p.cpus_per_task) == (2, 4, 4, 18)
    assert p.mem_mb == 500000 and p.gpu_option == "--gres=gpu:a100:4"
    assert p.constraint == "gpu" and not p.emit_partition and p.time == "23:59:00"


@pytest.mark.parametrize(
    ("gpus", "cpus", "mem"), [(1, 18, 125000), (2, 36, 250000), (4, 72, 500000)]
)
def test_raven_shared_node_rule(gpus: int, cpus: int, mem: int) -> None:
    p = plan("raven", gpus_per_node=gpus)
    assert p.cpus_per_node == cpus and p.mem_mb == mem


def test_single_gpu_default() -> None:
    p = plan("marvin", account="ag_x")
    assert p.gpus_per_node == 1 and p.tasks_per_node == 1
    assert p.cpus_per_task == 32 and p.mem_mb == 250000  # a quarter of an sgpu node


def test_gilbreth_four_by_one() -> None:
    p = plan("gilbreth", account="lab", nodes=4, gpus_per_node=1)
    assert p.gpu_option == "--gpus-per-node=1" and p.tasks_per_node == 1 and p.nodes == 4


def test_torchrun_one_task_per_node() -> None:
    p = plan("raven", nodes=2, launcher="torchrun")
    assert p.tasks_per_node == 1 and p.cpus_per_task == 72


# Rule: GPUs per node over the partition's


def test_too_many_gpus_per_node() -> None:
    msg = refused("raven", gpus_per_node=8)
    assert "8 GPUs on one node is impossible (4 per node" in msg
    assert " - --nodes 2 --gpus-per-node 4 is accepted" in msg


def test_raven_allowed_counts() -> None:
    assert "only 1, 2, 4" in refused("raven", gpus_per_node=3)
    assert "--gpus-per-node 4" in refused("raven", gpus_per_node=3)


def test_raven_multinode_needs_full_nodes() -> None:
    msg = refused("raven", nodes=2, gpus_per_node=2)
    assert "multi-node jobs on gpu must use whole nodes" in msg and "--gpus-per-node 4" in msg


# Rules: CPUs and memory


def test_cpus_over_node() -> None:
    msg = refused("raven", nodes=1, gpus_per_node=4, cpus_per_task=32)
    assert "4 task(s) x 32 CPUs = 128" in msg and "--cpus-per-task 18" in msg


def test_raven_strict_share() -> None:
    assert "at most 18 CPUs" in refused("raven", gpus_per_node=1, cpus_per_task=36)
    assert "at most 125000 MB" in refused("raven", gpus_per_node=1, mem="200000")


def test_mem_over_node() -> None:
    msg = refused("marvin", account="a", mem="2000G")
    assert "more than a sgpu_short node has" in msg


def test_mem_zero_refused() -> None:
    assert "--mem 0" in refused("gilbreth", account="a", mem="0")


def test_bad_mem_syntax() -> None:
    assert "--mem: invalid memory" in refused("raven", mem="lots")


# Rules: wall time, nodes, partitions, QOS, account, constraint


def test_time_over_partition() -> None:
    msg = refused("raven", time="48:00:00")
    assert "over the limit of partition gpu (1-00:00:00)" in msg and "--time 1-00:00:00" in msg
    assert "00:15:00" in refused("raven", partition="gpudev", time="1:00:00")


def test_time_over_qos() -> None:
    msg = refused("gilbreth", account="a", qos="standby", time="10:00:00")
    assert "QOS standby (04:00:00)" in msg


def test_nodes_over_partition_max() -> None:
    assert "at most 80 node(s)" in refused("raven", nodes=81)
    assert "at most 1 node(s)" in refused("raven", partition="gpudev", nodes=2)


def test_constraint_node_cap() -> None:
    assert "only 16 node(s) per job with --constraint gpu-bw" in refused(
        "raven", nodes=17, constraint="gpu-bw"
    )
    assert plan("raven", nodes=16, constraint="gpu-bw").constraint == "gpu-bw"


def test_unknown_constraint() -> None:
    assert "no constraint 'fast'" in refused("raven", constraint="fast")


def test_unknown_partition() -> None:
    msg = refused("marvin", account="a", partition="sgpu")
    assert "unknown partition 'sgpu'" in msg and "sgpu_short" in msg


def test_account_required() -> None:
    assert "account is required" in refused("gilbreth")
    assert "account is required" in refused("marvin")
    assert plan("raven").account is None


def test_required_qos_filled_and_enforced() -> None:
    p = plan("gilbreth", account="a", partition="training")
    assert p.qos == "training" and p.notes
    assert "requires --qos training" in refused(
        "gilbreth", account="a", partition="training", qos="standby"
    )
    assert "unknown QOS 'gold'" in refused("gilbreth", account="a", qos="gold")


# Rules: sbatch options


@pytest.mark.parametrize(
    ("arg", "needle"),
    [
        ("--mem-per-cpu=4G", "use --mem MEMORY (per node: 4G for each of its CPUs) instead"),
        ("--cpus-per-gpu=4", "use --cpus-per-task 4 (one task per GPU"),
        ("--ntasks-per-gpu=1", "drop it: tasks follow the GPUs"),
        ("--nodes=3", "use --nodes 3 instead"),
        ("--gres=gpu:2", "use --gpus-per-node 2 (hpctrain writes"),
        ("-p", "use --partition NAME instead"),
        ("mail", "not an sbatch option"),
    ],
)
def test_sbatch_arg_conflicts(arg: str, needle: str) -> None:
    assert needle in refused("raven", sbatch_args=[arg])


def test_exclusive_oversubscribe() -> None:
    assert "--exclusive and --oversubscribe conflict" in refused(
        "raven", sbatch_args=["--exclusive", "--oversubscribe"]
    )


def test_hint_with_profile_default() -> None:
    # Marvin's profile adds --threads-per-core=1, which makes SLURM ignore --hint.
    assert "--hint with --threads-per-core" in refused(
        "marvin", account="a", sbatch_args=["--hint=nomultithread"]
    )


def test_extra_sbatch_passes() -> None:
    p = plan("raven", sbatch_args=["--mail-type=END", "--exclusive"])
    assert p.extra_sbatch == ("--mail-type=END", "--exclusive")


# Rule: launchers (srun: tasks per node = GPUs per node; per-node: one task holds the node)


@pytest.mark.parametrize("gpus", [1, 2, 4])
def test_srun_tasks_equal_gpus(gpus: int) -> None:
    assert plan("raven", gpus_per_node=gpus).tasks_per_node == gpus


def test_per_node_one_task_holds_the_node() -> None:
    p = plan("marvin", partition="sgpu_devel", gpus_per_node=2, launcher="per-node",
             account="ag", command=("python", "Scripts/MNIST.py"))
    srun = plan("marvin", partition="sgpu_devel", gpus_per_node=2, account="ag")
    assert (p.tasks_per_node, p.gpu_option) == (1, "--gres=gpu:a100:2")
    # The one task holds what srun's two tasks hold together.
    assert p.cpus_per_task == srun.cpus_per_task * 2 and p.cpus_per_node == srun.cpus_per_node


def test_per_node_runs_the_packaged_trainer_once_per_node() -> None:
    # The trainer imports once per node and forks the node's workers (trainer/workers.py).
    for command in ((), ("python", "-m", "hpctrain.trainer", "--task", "mnist")):
        p = plan("local", nodes=2, gpus_per_node=2, launcher="per-node", command=command)
        assert (p.launcher, p.tasks_per_node, p.nodes) == ("per-node", 1, 2)
        assert p.command[:3] == ("python", "-m", "hpctrain.trainer")


@pytest.mark.parametrize(("launcher", "key"), [
    ("srun", "RANK"), ("srun", "MASTER_PORT"), ("torchrun", "LOCAL_WORLD_SIZE"),
    ("per-node", "NODE_RANK"), ("per-node", "WORLD_SIZE"), ("per-node", "MASTER_ADDR"),
])
def test_variables_the_launcher_sets_are_refused_in_env(launcher: str, key: str) -> None:
    msg = refused("local", launcher=launcher, command=("python", "x.py"), env={key: "3"})
    assert f"--env {key}=...: the {launcher} launcher sets {key} itself" in msg


def test_variables_another_launcher_sets_pass() -> None:
    p = plan("local", launcher="srun", command=("python", "x.py"), env={"NODE_RANK": "0"})
    assert p.env == (("NODE_RANK", "0"),)


def test_all_problems_reported_at_once() -> None:
    with pytest.raises(PlanError) as e:
        plan("gilbreth", gpus_per_node=9, time="99-00:00:00")
    assert len(e.value.problems) >= 3


# Hostile values that cannot be made safe are refused


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("job_name", "a\nb", "newline"),
        ("job_name", "a/b", "'/'"),
        ("account", "lab;rm", "characters SLURM names never contain"),
        ("qos", "$(id)", "characters SLURM names never contain"),
        ("log_dir", "/tmp/x\n", "newline"),
        ("log_dir", "/tmp/100%", "'%'"),
    ],
)
def test_unsafe_values_refused(field: str, value: str, needle: str) -> None:
    assert needle in refused("raven", **{field: value})


def test_secret_env_refused() -> None:
    msg = refused("raven", env={"COMET_API_KEY": "abc123456789"})
    assert "secret" in msg and "abc123456789" not in msg


def test_config_and_command_exclusive() -> None:
    assert "--config applies to the packaged trainer" in refused(
        "raven", config="c.yaml", command=("python", "x.py")
    )


def test_default_command_is_trainer() -> None:
    assert plan("raven").command == ("python", "-m", "hpctrain.trainer", "--task", "spiral")
    # The command is made from the settings; the file itself is not read by the job.
    settings = load_config(task="mnist", overrides=["trainer.max_epochs=3"])
    assert plan("raven", config="c.yaml", trainer=settings).command == (
        "python", "-m", "hpctrain.trainer", "--task", "mnist", "--set", "trainer.max_epochs=3")


def test_plan_is_pure() -> None:
    req = JobRequest(profile=load_profile("raven"), nodes=2)
    assert build_plan(req) == build_plan(replace(req))


# An unknown partition is one problem among the others


def test_unknown_partition_and_bad_time_reported_together() -> None:
    with pytest.raises(PlanError) as e:
        plan("marvin", account="a", partition="sgpu", time="soon")
    first, second = e.value.problems
    assert first == (
        "marvin: unknown partition 'sgpu'; choose one of: sgpu_devel, sgpu_short, "
        "sgpu_medium, sgpu_long, mlgpu_devel, mlgpu_short, mlgpu_medium, mlgpu_long"
    )
    assert second.startswith("--time: invalid time 'soon'")


def test_unknown_partition_keeps_checks_that_need_no_partition() -> None:
    with pytest.raises(PlanError) as e:
        plan("gilbreth", partition="nope", nodes=0, job_name="a/b", qos="gold")
    problems = e.value.problems
    assert "unknown partition 'nope'" in problems[0]
    assert any("--nodes 0" in p for p in problems)
    assert any("unknown QOS 'gold'" in p for p in problems)
    assert any("account is required" in p for p in problems)
    assert any("contains '/'" in p for p in problems)


def test_unknown_partition_skips_limits_of_the_stand_in() -> None:
    # The default partition only stands in for the unknown one; its limits would mislead.
    with pytest.raises(PlanError) as e:
        plan("raven", partition="nope", gpus_per_node=8, nodes=81, time="48:00:00",
             cpus_per_task=500, mem="2000G", constraint="fast")
    assert e.value.problems == ["raven: unknown partition 'nope'; choose one of: gpu, gpudev"]


def test_problems_come_in_rule_order() -> None:
    with pytest.raises(PlanError) as e:
        plan("gilbreth", gpus_per_node=9, time="99-00:00:00", job_name="")
    gpus, time, account, name = e.value.problems
    assert "9 GPUs on one node is impossible" in gpus
    assert "over the limit of partition" in time
    assert "account is required" in account and "--job-name is empty" in name


@pytest.mark.parametrize("forced", [["trainer.cuda_graphs=true"], ["trainer.cuda_graphs=yes"],
                                    ["trainer.cuda_graphs=false", "trainer.cuda_graphs=True"]])
def test_forced_cuda_graphs_refused_where_the_shape_rules_them_out(forced: list[str]) -> None:
    settings = load_config(overrides=forced)
    several = refused("local", nodes=2, trainer=settings)
    assert "trainer.cuda_graphs=true needs one training process on one GPU; this job has 4" \
        in several and "leave trainer.cuda_graphs auto" in several
    assert "needs a GPU; this job has none" in refused("local", gpus_per_node=0, trainer=settings)
    assert plan("local", gpus_per_node=1, trainer=settings).command[-2:] == (
        "--set", "trainer.cuda_graphs=true")


@pytest.mark.parametrize("sets", [["trainer.cuda_graphs=auto"], ["trainer.cuda_graphs=false"],
                                  ["trainer.cuda_graphs=true", "trainer.cuda_graphs=false"]])
def test_cuda_graphs_left_to_the_trainer_unless_forced(sets: list[str]) -> None:
    assert plan("local", nodes=2, trainer=load_config(overrides=sets)).nodes == 2
    # Another program's --set is its own business.
    assert plan("local", nodes=2, command=("python", "train.py", "--set",
                                           "trainer.cuda_graphs=true")).nodes == 2
