"""`hpctrain submit`: prepare a job as a value, then show it (--dry-run) or execute it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hpctrain.cli import backends
from hpctrain.cli.options import LoginOpt, TopologyOptions, build_request, with_topology
from hpctrain.cli.output import console, err_console, print_json
from hpctrain.cli.race import FirstOfOpt
from hpctrain.cli.render import show_script, show_summary

if TYPE_CHECKING:
    from hpctrain.jobs.prepare import Prepared
    from hpctrain.jobs.submit import Submitted
    from hpctrain.plan import JobRequest
    from hpctrain.remote.connection import Connection

DryRunOpt = Annotated[
    bool,
    typer.Option("--dry-run", help="Print the plan, script and run directory; "
                 "create and submit nothing."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output (docs/jobs.md).")]
ChainOpt = Annotated[
    int, typer.Option("--chain", help="Queue N jobs, each after the one before, sharing one run "
                      "directory: a long training carried on past the time limit.")
]
AfterOpt = Annotated[
    str | None, typer.Option("--after", help="Start only after these jobs ended well "
                             "(afterok), e.g. --after 1234,1235.")
]


def show_dry_run(prep: Prepared, json_out: bool) -> None:
    """What submit would do: the script on stdout, the plan and run directory on stderr."""
    if json_out:
        print_json({"dry_run": True, "job_id": None, **prep.as_dict(),
                    "script_text": prep.script})
        return
    show_script(prep.script)
    show_summary(prep.plan)
    err_console.print(
        f"dry run: nothing created or submitted; the run directory would be {prep.run_dir}",
        highlight=False,
    )


def show_submitted(done: Submitted, prep: Prepared, json_out: bool) -> None:
    """The job id, its run directory and how to follow it."""
    plan = prep.plan
    if json_out:
        print_json(done.as_dict(plan))
        return
    console.print(
        f"Submitted job [bold]{done.job_id}[/] ({plan.nodes} node(s) x "
        f"{plan.gpus_per_node} GPU(s), profile {plan.profile}, cluster "
        f"{done.cluster or '?'})",
        highlight=False,
    )
    if len(done.chain) > 1:
        console.print(f"chain of {len(done.chain)} jobs, each after the one before: "
                      f"{', '.join(done.chain)}", highlight=False)
    console.print(f"run directory: {done.run_dir}", highlight=False, soft_wrap=True)
    console.print(f"follow it:     hpctrain status {done.job_id}", highlight=False)
    console.print(f"               hpctrain logs -f {done.job_id}", highlight=False)
    for note in plan.notes:
        err_console.print(f"[yellow]note:[/] {note}")


def _through_login(request: JobRequest, conn: Connection, topology: TopologyOptions,
                   dry_run: bool, json_out: bool) -> None:
    """Submit over the login's ssh master: sync, render with the remote's facts, sbatch there."""
    from hpctrain.remote import submit as remote

    if dry_run:
        conn.require()
        prep, _site = remote.prepare_remote(
            remote.remote_request(request, conn, topology.python_env), conn, Path.cwd())
        show_dry_run(prep, json_out)
        return
    done = remote.submit_remote(request, conn, Path.cwd(), backends.history(),
                                topology.python_env)
    if not json_out:
        err_console.print(f"synced {done.synced.files} file(s) ({done.synced.source}) to "
                          f"{conn.target.host}:{done.prep.workdir}", highlight=False)
        show_submitted(done.submitted, done.prep, json_out)
        return
    print_json({**done.submitted.as_dict(done.prep.plan), "login": conn.target.host,
                "synced_files": done.synced.files, "ssh_round_trips": done.round_trips})


@with_topology
def submit(
    topology: TopologyOptions, chain: ChainOpt = 1, after: AfterOpt = None,
    login: LoginOpt = None, first_of: FirstOfOpt = None, dry_run: DryRunOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Submit a job: render it, create its run directory, sbatch it and record it."""
    from dataclasses import replace

    from hpctrain.jobs.prepare import prepare
    from hpctrain.jobs.submit import check_submission
    from hpctrain.jobs.submit import submit as execute

    after_ids = tuple(a.strip() for a in (after or "").split(",") if a.strip())
    request = replace(build_request(topology), chain=chain, after=after_ids)
    from hpctrain.remote.site import for_profile

    conn = for_profile(request.profile, login)
    if first_of is not None:
        from hpctrain.cli import race

        if conn is not None:
            race.race_through_login(request, first_of, conn, topology.python_env, dry_run,
                                    json_out)
        else:
            race.submit_race(request, first_of, dry_run, json_out)
        return
    if conn is not None:
        _through_login(request, conn, topology, dry_run, json_out)
        return
    prep = prepare(request, Path.cwd(), environ=os.environ)
    if dry_run:
        # The dry run must fail wherever the real submit would, before SLURM is asked.
        check_submission(prep)
        show_dry_run(prep, json_out)
        return
    client, _cluster = backends.slurm()
    show_submitted(execute(prep, client, backends.history()), prep, json_out)


def register(app: typer.Typer) -> None:
    """Add submit to the root app."""
    app.command(
        context_settings={"allow_interspersed_args": False},
        epilog="Example: hpctrain submit --profile local --nodes 2 -- printenv SLURMD_NODENAME",
    )(submit)
