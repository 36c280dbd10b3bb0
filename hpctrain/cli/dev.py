"""`hpctrain dev` (a shell on the job's nodes with the batch job's environment) and
`hpctrain dev-run` (the job's launch, run again from that shell), `hpctrain dev --attach`
(an ssh alias to the dev job's node): docs/dev.md."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from hpctrain.cli import argv, backends
from hpctrain.cli.display import DRY_RUN, show
from hpctrain.cli.flags import JSON, Flags
from hpctrain.cli.options import JobOptions, Row, build_request, job_command, job_option

if TYPE_CHECKING:
    import typer

    from hpctrain.places import Place
    from hpctrain.submission.submit import Submitted

DEFAULT_SSH_CONFIG = "~/.ssh/config.d/hpctrain"
# `--attach JOB`: no new job, so no --profile either (run_plain takes it before click).
ATTACH = (
    Row("attach", str | None, None, Flags(
        ("--attach",), "Print an ssh host alias that reaches dev job JOB's node (VS Code "
        "Remote-SSH, ssh -L), through the login it went through; queues nothing "
        "(docs/dev.md).", metavar="JOB")),
    Row("write_ssh_config", bool, False, Flags(
        ("--write-ssh-config",), "With --attach: write the alias into --ssh-config-file (its "
        "block for this job replaced, the rest kept) instead of printing it.")),
    Row("ssh_config_file", str, DEFAULT_SSH_CONFIG, Flags(
        ("--ssh-config-file",), "The ssh config file --write-ssh-config writes; include it "
        "from ~/.ssh/config.", metavar="PATH")),
)
OWN = (Row("dry_run", bool, False, DRY_RUN), Row("json_out", bool, False, JSON), *ATTACH)


def run_plain(args: Sequence[str]) -> bool:
    """`dev --attach JOB [...]` without click (and without --profile); False: anything else."""
    if not any(a == "--attach" or a.startswith("--attach=") for a in args):
        return False
    parsed = argv.parse(args, ATTACH)
    if parsed is None or parsed[1] or parsed[0].get("attach") is None:
        return False
    attach_alias(**parsed[0])
    return True


def dev(job: JobOptions, dry_run: bool = False, json_out: bool = False,
        attach: str | None = None, write_ssh_config: bool = False,
        ssh_config_file: str = DEFAULT_SSH_CONFIG) -> None:
    """Open a shell on a job's node with what its batch script would set; exit ends the job."""
    if attach is not None:
        attach_alias(attach, write_ssh_config, ssh_config_file)
        return
    from hpctrain.submission.dev import DevKind
    from hpctrain.submission.pipeline import run
    from hpctrain.submission.questions import before_submit

    request = build_request(job)
    # Through a login: the project is synced, the job queued and the shell attached over the
    # one ssh master (`ssh -t` to the login, then srun there as here).
    place = backends.place_for(request.profile, None, job.python_env)
    history = backends.history()
    outcome = run(DevKind(before_submit(request, place, history)), place, history, dry_run)
    if outcome.result is None:
        show(outcome, place, json_out)
        return
    code = _shell(outcome.result, place, history, in_container=request.container is not None)
    if code:
        import typer

        raise typer.Exit(code)


def _shell(done: Submitted, place: Place, history: Any, in_container: bool = False) -> int:
    """Wait for the dev job's environment, then attach the shell; its exit status."""
    from hpctrain.cli.output import err_console
    from hpctrain.submission.dev import wait_ready
    from hpctrain.tracking.watcher import JobWatcher

    say = err_console.print
    say(f"hpctrain: dev job {done.job_id} queued ({place.shown(done.run_dir)}); waiting for "
        "its nodes",
        highlight=False, soft_wrap=True)
    watcher = JobWatcher(place.slurm_client(), history, done.cluster)
    try:
        rc_file = wait_ready(done, place, watcher)
    except KeyboardInterrupt:
        # The user gave up waiting: the allocation must not sit idle for its idle time.
        watcher.cancel([done.record])
        say(f"hpctrain: dev job {done.job_id} cancelled", highlight=False)
        raise
    code = place.run_attached(_shell_argv(done, place, rc_file, in_container))
    say(f"hpctrain: dev job {done.job_id} ends with its shell; `hpctrain why {done.job_id}` "
        "tells what it did", highlight=False, soft_wrap=True)
    return code


def _shell_argv(done: Submitted, place: Place, rc_file: Path,
                in_container: bool) -> tuple[str, ...]:
    """The shell's srun; in a container, with the words and srun options the job's script
    saved (read on the node, and through the place: never worked out again here)."""
    from hpctrain.slurm.interactive import shell_argv
    from hpctrain.submission.devrelay import ContainerFiles, nul_words
    from hpctrain.values.rundir import RunDir

    if not in_container:
        return shell_argv(done.job_id, rc_file)
    files = ContainerFiles(RunDir(done.run_dir).dev_env)
    read = place.read_file(files.srun_options, None)
    return shell_argv(done.job_id, rc_file, container=(files.words, files.dev_env),
                      srun_options=nul_words(read[0]) if read else ())


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
                      f"{plan.gpus_per_node} GPU(s), launcher {plan.launcher}"
                      + (f", in {plan.container.image}" if plan.container else "")
                      + f", into {here}",
                      highlight=False, soft_wrap=True)
    # SLURM_OVERLAP: the launch step shares the CPUs the shell's own step holds.
    if plan.container is None:
        code = run_script(script, {"SLURM_OVERLAP": "1"})
    else:
        code = _relayed(Path(run_dir), here)
    if code:
        import typer

        raise typer.Exit(code)


def _relayed(run_dir: Path, here: Path) -> int:
    """dev-run in a container, where no srun is: the dev job's script runs the script outside
    (docs/dev.md, "In a container"), with this shell's directory and environment."""
    import sys

    from hpctrain.submission.devrelay import (
        ContainerFiles,
        env_changes,
        environ_words,
        relay,
        relay_request,
    )
    from hpctrain.values.rundir import RunDir

    files = ContainerFiles(RunDir(run_dir).dev_env)
    try:
        started = environ_words(files.inside_env.read_bytes())
    except OSError:
        started = {}
    words = env_changes(started, {**os.environ, "SLURM_OVERLAP": "1"})
    return relay(here, files.relay, relay_request(os.getcwd(), words), sys.stdout.buffer)


def attach_alias(attach: str, write_ssh_config: bool = False,
                 ssh_config_file: str = DEFAULT_SSH_CONFIG) -> None:
    """Print an ssh host alias that reaches a dev job's node (VS Code Remote-SSH, ssh -L)."""
    from hpctrain.cli.output import err_console
    from hpctrain.submission import devssh
    from hpctrain.tracking import selection
    from hpctrain.tracking.watcher import JobWatcher

    history = backends.history()
    job_id = attach
    record = selection.pick(history, job_id)
    place = backends.place_for(record)
    client = place.slurm_client()
    watcher = JobWatcher(client, history, place.cluster(client, record.cluster))
    alias = devssh.attach(record, place, watcher)
    say = err_console.print
    if not write_ssh_config:
        print(alias.block, end="")
        say(f"hpctrain: `ssh {alias.name}` reached job {job_id}'s node; --write-ssh-config "
            f"writes this into {ssh_config_file}", highlight=False, soft_wrap=True)
        return
    path = Path(ssh_config_file).expanduser()
    done = devssh.write_alias(alias, path)
    say(f"hpctrain: {done} Host {alias.name} in {path}; `ssh {alias.name}` reaches job "
        f"{job_id}'s node", highlight=False, soft_wrap=True)
    include = Path("~/.ssh/config").expanduser()
    if path.parent.name == "config.d" and (not include.exists() or f"config.d/{path.name}"
                                           not in include.read_text(errors="replace")):
        say(f"hpctrain: add `Include config.d/{path.name}` at the top of {include}",
            highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add dev and dev-run to the root app."""
    app.command(
        name="dev", context_settings={"allow_interspersed_args": False},
        epilog="Examples: hpctrain dev --profile local --nodes 2; (on the laptop, another "
        "terminal) hpctrain dev --attach 1234 --write-ssh-config",
    )(job_command(__name__, "dev", OWN))
    app.command(
        name="dev-run", context_settings={"allow_interspersed_args": False},
        epilog="Example (in the dev shell): hpctrain dev-run -- python train.py",
    )(dev_run)
