"""`hpctrain dev` (a shell on the job's nodes with the batch job's environment) and
`hpctrain dev-run` (the job's launch, run again from that shell): docs/dev.md."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from hpctrain.cli import backends
from hpctrain.cli.display import DRY_RUN, show
from hpctrain.cli.flags import JSON
from hpctrain.cli.options import JobOptions, Row, build_request, job_command, job_option

if TYPE_CHECKING:
    import typer

    from hpctrain.places import Place
    from hpctrain.submission.submit import Submitted

OWN = (Row("dry_run", bool, False, DRY_RUN), Row("json_out", bool, False, JSON))


def dev(job: JobOptions, dry_run: bool = False, json_out: bool = False) -> None:
    """Open a shell on a job's node with what its batch script would set; exit ends the job."""
    from hpctrain.errors import HpctrainError
    from hpctrain.places import LocalPlace
    from hpctrain.submission.dev import DevKind
    from hpctrain.submission.pipeline import run
    from hpctrain.submission.questions import before_submit

    request = build_request(job)
    place = backends.place_for(request.profile, None, job.python_env)
    if not isinstance(place, LocalPlace):
        raise HpctrainError(f"profile {request.profile.name} is reached through a login: a "
                            "dev shell is opened on the cluster itself for now",
                            "ssh to the login node and run `hpctrain dev` there")
    history = backends.history()
    outcome = run(DevKind(before_submit(request, place, history)), place, history, dry_run)
    if outcome.result is None:
        show(outcome, place, json_out)
        return
    code = _shell(outcome.result, place, history)
    if code:
        import typer

        raise typer.Exit(code)


def _shell(done: Submitted, place: Place, history: Any) -> int:
    """Wait for the dev job's environment, then attach the shell; its exit status."""
    from hpctrain.cli.output import err_console
    from hpctrain.slurm.interactive import attach
    from hpctrain.submission.dev import wait_ready
    from hpctrain.tracking.watcher import JobWatcher

    say = err_console.print
    say(f"hpctrain: dev job {done.job_id} queued ({done.run_dir}); waiting for its nodes",
        highlight=False, soft_wrap=True)
    watcher = JobWatcher(place.slurm_client(), history, done.cluster)
    try:
        rc_file = wait_ready(done, place, watcher)
    except KeyboardInterrupt:
        # The user gave up waiting: the allocation must not sit idle for its idle time.
        watcher.cancel([done.record])
        say(f"hpctrain: dev job {done.job_id} cancelled", highlight=False)
        raise
    code = attach(done.job_id, rc_file)
    say(f"hpctrain: dev job {done.job_id} ends with its shell; `hpctrain why {done.job_id}` "
        "tells what it did", highlight=False, soft_wrap=True)
    return code


def dev_run(command: Annotated[list[str] | None, job_option(
        "command", "Command to run on every rank after --, e.g. -- python train.py (default: "
        "the dev job's own: the packaged trainer with its settings).")] = None) -> None:
    """Inside a dev shell: run the job's command (or -- COMMAND) on every rank of the job."""
    from hpctrain.errors import HpctrainError
    from hpctrain.render.script import render_script
    from hpctrain.slurm.interactive import run_script
    from hpctrain.submission.dev import dev_request, next_run_dir, run_plan
    from hpctrain.values.rundir import RunDir

    job_id, run_dir = os.environ.get("SLURM_JOB_ID"), os.environ.get("HPCTRAIN_RUN_DIR")
    if not job_id or not run_dir:
        raise HpctrainError("dev-run runs inside a dev job's shell (SLURM_JOB_ID and "
                            "HPCTRAIN_RUN_DIR are not set here)",
                            "start one with `hpctrain dev -P PROFILE`, then run it there")
    here = next_run_dir(Path(run_dir))
    plan = run_plan(dev_request(Path(run_dir)), tuple(command or ()), here)
    script = RunDir(here).script
    script.write_text(render_script(plan, environ=os.environ), encoding="utf-8")
    from hpctrain.cli.output import err_console

    err_console.print(f"hpctrain: dev-run in job {job_id}: {plan.nodes} node(s) x "
                      f"{plan.gpus_per_node} GPU(s), launcher {plan.launcher}, into {here}",
                      highlight=False, soft_wrap=True)
    # SLURM_OVERLAP: the launch step shares the CPUs the shell's own step holds.
    code = run_script(script, {"SLURM_OVERLAP": "1"})
    if code:
        import typer

        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add dev and dev-run to the root app."""
    app.command(
        name="dev", context_settings={"allow_interspersed_args": False},
        epilog="Example: hpctrain dev --profile local --nodes 2",
    )(job_command(__name__, "dev", OWN))
    app.command(
        name="dev-run", context_settings={"allow_interspersed_args": False},
        epilog="Example (in the dev shell): hpctrain dev-run -- python train.py",
    )(dev_run)
