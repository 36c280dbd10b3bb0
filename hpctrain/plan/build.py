"""Assemble a job plan from the named rules, in the order their problems are reported."""

from __future__ import annotations

from hpctrain.plan.access import choose_account, choose_constraint
from hpctrain.plan.inputs import check_inputs, choose_command
from hpctrain.plan.limits import choose_qos, wall_time
from hpctrain.plan.model import JobPlan, JobRequest
from hpctrain.plan.outcome import Findings
from hpctrain.plan.resources import cpus_per_task, memory, node_share
from hpctrain.plan.restart import restart_policy
from hpctrain.plan.sbatch import sbatch_options
from hpctrain.plan.topology import choose_partition, tasks_per_node, topology


def build_plan(req: JobRequest) -> JobPlan:
    """Validate a request against its profile; raise PlanError listing every problem with a fix."""
    profile = req.profile
    chosen = choose_partition(req)
    # An unknown partition is replaced by the default only so that the other rules can run;
    # what they say about fitting that stand-in would mislead, so it is left out.
    found = Findings(check_fit=not chosen.problems)
    part = found.take(chosen)
    shape = found.take(topology(req, part))
    tasks = tasks_per_node(req.launcher, shape.gpus_per_node)
    share = node_share(profile, part, shape.gpus_per_node)
    cpt = found.take(cpus_per_task(req, part, tasks, share))
    mem_mb = found.take(memory(req, part, share))
    qos = found.take(choose_qos(req, part))
    time_s = found.take(wall_time(req, part, qos))
    account = found.take(choose_account(req))
    constraint = found.take(choose_constraint(req, part, shape.nodes))
    inputs = found.take(check_inputs(req))
    options = found.take(sbatch_options(req, part, shape.gpus_per_node))
    command = found.take(choose_command(req))
    restart = found.take(restart_policy(req, command, time_s))
    found.raise_any()

    return JobPlan(
        profile=profile.name,
        cluster=profile.cluster,
        partition=part.name,
        emit_partition=not (part.implicit and req.partition is None),
        nodes=shape.nodes,
        gpus_per_node=shape.gpus_per_node,
        gpu_type=part.gpu_type if shape.gpus_per_node else None,
        tasks_per_node=tasks,
        cpus_per_task=cpt,
        mem_mb=mem_mb,
        time_seconds=time_s,
        account=account,
        qos=qos,
        constraint=constraint,
        job_name=req.job_name,
        launcher=req.launcher,
        gpu_option=options.gpu_option,
        extra_sbatch=options.extra,
        env=inputs.env,
        nccl=tuple(profile.nccl.variables().items()),
        modules=tuple(profile.environment.modules),
        module_use=tuple(profile.environment.module_use),
        module_purge=profile.environment.purge,
        setup_lines=tuple(profile.environment.setup),
        python_env=req.python_env,
        command=command,
        log_dir=inputs.log_dir,
        run_dir=req.run_dir,
        invocation=req.invocation,
        grace_s=restart.grace_s,
        requeue=restart.requeue,
        chain=restart.chain,
        after=restart.after,
        notes=tuple(found.notes),
    )
