"""`hpctrain submit`: render a job, create its run directory, sbatch it and record it."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from hpctrain.cli import backends
from hpctrain.cli import options as o
from hpctrain.cli.output import console, err_console, is_tty, print_json

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output (docs/jobs.md).")]


def register(app: typer.Typer) -> None:
    """Add submit to the root app."""

    @app.command(
        context_settings={"allow_interspersed_args": False},
        epilog="Example: hpctrain submit --profile local --nodes 2 -- printenv SLURMD_NODENAME",
    )
    def submit(
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
        dry_run: Annotated[
            bool,
            typer.Option("--dry-run", help="Print the plan, script and run directory; "
                         "create and submit nothing."),
        ] = False,
        json_out: JsonOpt = False,
        command: o.CommandArg = None,
    ) -> None:
        """Submit a job: render it, create its run directory, sbatch it and record it."""
        from hpctrain.jobs import submit as sub
        from hpctrain.plan import build_plan
        from hpctrain.render import render_script

        opts = o.TopologyOptions(
            profile=profile, partition=partition, nodes=nodes, gpus_per_node=gpus_per_node,
            cpus_per_task=cpus_per_task, mem=mem, time=time, account=account, qos=qos,
            constraint=constraint, job_name=job_name, launcher=launcher, env=env or [],
            sbatch_args=sbatch_arg or [], config=config, python_env=python_env,
            command=command or [],
        )
        cwd = Path.cwd()
        req = o.build_request(opts)
        run_dir = sub.run_dir_for(req.profile.output_dir, job_name, cwd)
        req = replace(req, log_dir=str(run_dir), run_dir=str(run_dir))
        plan = build_plan(req)
        script = render_script(plan, environ=os.environ)
        prep = sub.Prepared(
            plan=plan, script=script, run_dir=run_dir, profile=req.profile,
            config=(cwd / config) if config else None, workdir=cwd,
        )
        if dry_run:
            _show_dry_run(prep, json_out)
            return
        client, _cluster = backends.slurm()
        done = sub.submit(prep, client, backends.history())
        if json_out:
            print_json(done.as_dict(plan))
            return
        console.print(
            f"Submitted job [bold]{done.job_id}[/] ({plan.nodes} node(s) x "
            f"{plan.gpus_per_node} GPU(s), profile {plan.profile}, cluster "
            f"{done.cluster or '?'})",
            highlight=False,
        )
        console.print(f"run directory: {done.run_dir}", highlight=False, soft_wrap=True)
        console.print(f"follow it:     hpctrain status {done.job_id}", highlight=False)
        console.print(f"               hpctrain logs -f {done.job_id}", highlight=False)
        for note in plan.notes:
            err_console.print(f"[yellow]note:[/] {note}")


def _show_dry_run(prep: Any, json_out: bool) -> None:
    from hpctrain.cli.render import show_summary

    if json_out:
        print_json({"dry_run": True, "job_id": None, **prep.as_dict(),
                    "script_text": prep.script})
        return
    if is_tty():
        from rich.syntax import Syntax

        console.print(Syntax(prep.script, "bash", theme="ansi_dark", word_wrap=True))
    else:
        typer.echo(prep.script, nl=False)
    show_summary(prep.plan)
    err_console.print(
        f"dry run: nothing created or submitted; the run directory would be {prep.run_dir}",
        highlight=False,
    )
