"""Assemble a job plan from the named rules, in the order their problems are reported."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hpctrain.errors import PlanError
from hpctrain.plan.access import choose_account
from hpctrain.plan.batch import global_batch_problems
from hpctrain.plan.budget import within_budget
from hpctrain.plan.container import container_policy
from hpctrain.plan.containerplan import ContainerPlan
from hpctrain.plan.inputs import check_inputs, choose_command
from hpctrain.plan.launch_lines import adopt_launch_line
from hpctrain.plan.launchers import LaunchMode, launcher_problems
from hpctrain.plan.limits import choose_qos, wall_time
from hpctrain.plan.maintenance import maintenance_windows
from hpctrain.plan.model import JobPlan, JobRequest
from hpctrain.plan.nodetypes import Fit, fit_node_types, selected_types
from hpctrain.plan.outcome import Collector
from hpctrain.plan.quarantine import exclusion
from hpctrain.plan.recovery import restarts_policy
from hpctrain.plan.resources import NodeShare, cpus_per_task, memory, node_share
from hpctrain.plan.restart import restart_policy, runs_trainer
from hpctrain.plan.sbatch import sbatch_options
from hpctrain.plan.stall import retry_room, stall_policy
from hpctrain.plan.topology import Topology, choose_partition, topology
from hpctrain.plan.trainer_options import cuda_graphs_problems
from hpctrain.profiles.model import Partition, Profile


def _placement(
    req: JobRequest, part: Partition, mode: LaunchMode, found: Collector
) -> tuple[Topology, int, Fit, NodeShare]:
    """Where the job runs: nodes and GPUs, tasks per node, the node types that fit, their share."""
    base = found.take(selected_types(req, part), shape=True)
    shape = found.take(topology(req, part, base), shape=True)
    tasks = mode.tasks_per_node(shape.gpus_per_node)
    fit = found.take(fit_node_types(req, part, base, shape.nodes, shape.gpus_per_node, tasks),
                     shape=True)
    return shape, tasks, fit, node_share(req.profile, fit, shape.gpus_per_node)


def _site_environment(profile: Profile, container: ContainerPlan | None) -> dict[str, Any]:
    """The profile's environment set-up for the plan: NCCL variables, modules (the container
    runtime's after the profile's own), set-up lines."""
    env = profile.environment
    return {
        "nccl": tuple(profile.nccl.variables().items()),
        "modules": tuple(env.modules) + (container.modules if container else ()),
        "module_use": tuple(env.module_use),
        "module_purge": env.purge,
        "setup_lines": tuple(env.setup),
    }


def build_plan(req: JobRequest, suggest: bool = True) -> JobPlan:
    """Validate a request against its profile; raise PlanError listing every problem, with the
    nearest request the profile accepts as its fix (`suggest`: searched for, plan/suggest.py)."""
    try:
        plan = _assemble(req)
    except PlanError as e:
        if not suggest:
            raise
        # Here, not above: only a refused plan searches for its fix.
        from hpctrain.plan.suggest import with_fix

        raise with_fix(e, req, _assemble) from None
    if req.dev:
        from hpctrain.plan.dev import dev_plan

        return dev_plan(plan, req)
    return plan


def _cluster_now(req: JobRequest, part: Partition, nodes: int, time_s: int,
                 command: Sequence[str], found: Collector) -> tuple[str, ...]:
    """What the cluster's state now asks of the job (as the submit read it): the nodes to
    exclude (quarantined), room for a retry without a node, and no time limit that runs into
    a maintenance window."""
    exclude = found.take(exclusion(req, part.name, nodes))
    found.take(retry_room(req, part, nodes), shape=True)
    found.take(maintenance_windows(req, part.name, nodes, time_s, runs_trainer(command),
                                   exclude))
    return exclude


def _assemble(req: JobRequest) -> JobPlan:
    """The plan, from the rules in the order their problems are reported."""
    profile = req.profile
    chosen = choose_partition(req)
    # An unknown partition is replaced by the default only so that the other rules can run;
    # what they say about fitting that stand-in would mislead, so it is left out.
    found = Collector(check_fit=not chosen.problems)
    part = found.take(chosen, shape=True)
    req = found.take(adopt_launch_line(req))
    mode = found.take(launcher_problems(req))
    shape, tasks, fit, share = _placement(req, part, mode, found)
    cpt = found.take(cpus_per_task(req, tasks, share), shape=True)
    mem_mb = found.take(memory(req, share), shape=True)
    qos = found.take(choose_qos(req, part), shape=True)
    time_s = found.take(wall_time(req, part, qos), shape=True)
    account = found.take(choose_account(req))
    inputs = found.take(check_inputs(req))
    options = found.take(sbatch_options(req, fit, shape.gpus_per_node))
    command = found.take(choose_command(req))
    world = shape.nodes * mode.workers_per_node(shape.gpus_per_node)
    found.take(global_batch_problems(req, world))
    found.take(cuda_graphs_problems(req, world, shape.gpus_per_node))
    restart = found.take(restart_policy(req, command, time_s))
    stall = found.take(stall_policy(req, command))
    restarts = found.take(restarts_policy(req, command))
    container = found.take(container_policy(req, shape.gpus_per_node))
    exclude = _cluster_now(req, part, shape.nodes, time_s, command, found)
    found.take(within_budget(req, shape.nodes * shape.gpus_per_node, time_s))
    found.raise_any()
    return JobPlan(
        profile=profile.name,
        cluster=profile.cluster,
        partition=part.name,
        emit_partition=not (part.implicit and req.partition is None),
        nodes=shape.nodes,
        gpus_per_node=shape.gpus_per_node,
        gpu_type=fit.gpu_type,
        node_types=fit.names,
        tasks_per_node=tasks,
        cpus_per_task=cpt,
        mem_mb=mem_mb,
        time_seconds=time_s,
        account=account, qos=qos, constraint=fit.constraint, job_name=req.job_name,
        launcher=mode.name,
        gpu_option=options.gpu_option,
        extra_sbatch=options.extra,
        env=inputs.env,
        **_site_environment(profile, container),
        python_env=req.python_env,
        command=command,
        log_dir=inputs.log_dir,
        run_dir=req.run_dir,
        invocation=req.invocation,
        monitor_interval_s=req.monitor_interval_s, stall_window=stall.window, on_stall=stall.action,
        exclude=exclude, retries=stall.retries, restarts=restarts,
        grace_s=restart.grace_s, requeue=restart.requeue, chain=restart.chain,
        after=restart.after,
        notes=tuple(found.notes),
        race=req.race, code_dir=req.code_dir, array=req.array, container=container,
    )
