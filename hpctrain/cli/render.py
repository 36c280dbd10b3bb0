"""`hpctrain render`: print the sbatch script for a profile and topology."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from hpctrain.cli import options as o
from hpctrain.cli.output import console, err_console, is_tty, print_json
from hpctrain.plan import JobPlan, build_plan
from hpctrain.render import render_script


def show_summary(plan: JobPlan) -> None:
    """A one-glance summary of a plan, on stderr so that stdout stays the script."""
    from rich.table import Table

    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold")
    t.add_column()
    gpus = f"{plan.gpus_per_node} x {plan.gpu_type}" if plan.gpu_type else str(plan.gpus_per_node)
    rows = [
        ("profile", f"{plan.profile} ({plan.cluster}), partition {plan.partition}"),
        ("nodes", str(plan.nodes)),
        ("GPUs per node", gpus),
        ("total GPUs", str(plan.total_gpus)),
        ("tasks per node", f"{plan.tasks_per_node} ({plan.launcher})"),
        ("CPUs per node", f"{plan.cpus_per_node} ({plan.cpus_per_task} per task)"),
        ("memory per node", f"{plan.mem_mb} MB"),
        ("time", plan.time),
    ]
    for k, v in rows:
        t.add_row(k, v)
    err_console.print(t)
    for note in plan.notes:
        err_console.print(f"[yellow]note:[/] {note}")


def register(app: typer.Typer) -> None:
    @app.command(
        context_settings={"allow_interspersed_args": False},
        epilog="Example: hpctrain render --profile raven --nodes 2 --dry-run",
    )
    def render(
        profile: o.ProfileOpt,
        partition: o.PartitionOpt = None,
        nodes: o.NodesOpt = 1,
        gpus_per_node: o.GpusOpt = None,
        cpus_per_task: o.CpusOpt = None,
        mem: o.MemOpt = None,
        time: o.TimeOpt = None,
        account: o.AccountOpt = None,
        qos: o.QosOpt = None,
        constraint: o.ConstraintOpt = None,
        job_name: o.JobNameOpt = "hpctrain",
        launcher: o.LauncherOpt = "lightning",
        env: o.EnvOpt = None,
        sbatch_arg: o.SbatchArgOpt = None,
        config: o.ConfigOpt = None,
        python_env: o.PythonEnvOpt = None,
        output: Annotated[
            Path | None, typer.Option("--output", "-o", help="Write the script to FILE.")
        ] = None,
        dry_run: Annotated[
            bool, typer.Option("--dry-run", help="Print only; never submits (render never does).")
        ] = False,
        check: Annotated[
            bool,
            typer.Option("--check", help="Ask the SLURM in reach (sbatch --test-only) too."),
        ] = False,
        json_out: Annotated[
            bool, typer.Option("--json", help="Print the plan and script as JSON.")
        ] = False,
        command: o.CommandArg = None,
    ) -> None:
        """Render the sbatch script for a profile and topology; nothing is submitted."""
        opts = o.TopologyOptions(
            profile=profile, partition=partition, nodes=nodes, gpus_per_node=gpus_per_node,
            cpus_per_task=cpus_per_task, mem=mem, time=time, account=account, qos=qos,
            constraint=constraint, job_name=job_name, launcher=launcher, env=env or [],
            sbatch_args=sbatch_arg or [], config=config, python_env=python_env,
            command=command or [],
        )
        plan = build_plan(o.build_request(opts))
        script = render_script(plan, environ=os.environ)
        verdict = None
        if check:
            from hpctrain.slurm.client import SlurmClient, sbatch_test_only

            verdict = sbatch_test_only(SlurmClient.from_environment(), script)
        if output is not None:
            output.write_text(script, encoding="utf-8")
            output.chmod(0o755)
        if json_out:
            data: dict[str, object] = {"plan": plan.summary(), "script": script}
            if output is not None:
                data["written_to"] = str(output)
            if verdict is not None:
                data["check"] = {"accepted": verdict.accepted, "message": verdict.message}
            print_json(data)
        elif output is not None:
            err_console.print(f"wrote {output}")
            show_summary(plan)
        elif is_tty():
            from rich.syntax import Syntax

            console.print(Syntax(script, "bash", theme="ansi_dark", word_wrap=True))
            show_summary(plan)
        else:
            typer.echo(script, nl=False)
        if verdict is not None:
            if verdict.accepted:
                err_console.print(f"[green]SLURM accepts the script:[/] {verdict.message}")
            else:
                err_console.print(f"[red]SLURM refuses the script:[/] {verdict.message}")
                raise typer.Exit(1)
