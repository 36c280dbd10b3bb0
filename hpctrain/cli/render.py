"""`hpctrain render`: print the sbatch script for a profile and topology."""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from hpctrain.cli import argv, backends
from hpctrain.cli.costview import charged, show_usage
from hpctrain.cli.flags import JSON, Flags
from hpctrain.cli.options import (
    TRAINER_FLAGS,
    JobOptions,
    Row,
    build_request,
    job_command,
    job_table,
    trainer_option,
)
from hpctrain.cli.output import err_console, is_tty, print_code, print_err, print_json
from hpctrain.cli.race import FIRST_OF, ask_slurm, render_dict, show_alternatives, verdict_dict
from hpctrain.errors import HpctrainError

if TYPE_CHECKING:
    from collections.abc import Sequence

    import typer

    from hpctrain.plan import JobPlan
    from hpctrain.profiles.model import Profile
    from hpctrain.slurm.testonly import TestOnlyVerdict
    from hpctrain.submission.planned import Script

# render's own options, after the job's and the trainer's (cli/options.py).
OWN = (
    Row("output", Path | None, None, Flags(
        ("--output", "-o"), "Write the script to FILE (`-`: stdout), its log directory made "
        "and named absolutely.")),
    # render never submits: --dry-run is accepted for those who type it out of habit (submit's
    # own), and left out of the help, where it read as if render alone might submit.
    Row("dry_run", bool, False, Flags(("--dry-run",), "", hidden=True)),
    Row("check", bool, False, Flags(("--check",), "Ask the SLURM in reach (sbatch --test-only) "
                                    "too.")),
    Row("first_of", str | None, None, FIRST_OF),
    Row("json_out", bool, False, JSON),
    Row("force", bool, False, Flags(("--force",), "Overwrite an existing --output.")),
)


def show_summary(plan: JobPlan) -> None:
    """A one-glance summary of a plan, on stderr so that stdout stays the script."""
    from rich.table import Table

    from hpctrain.plan.launchers import LAUNCHERS

    mode = LAUNCHERS[plan.launcher]
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold")
    t.add_column()
    gpus = f"{plan.gpus_per_node} x {plan.gpu_type}" if plan.gpu_type else str(plan.gpus_per_node)
    rows = [
        ("profile", f"{plan.profile} ({plan.cluster}), partition {plan.partition}"),
        ("nodes", str(plan.nodes)),
        ("GPUs per node", gpus),
        ("total GPUs", str(plan.total_gpus)),
        ("launcher", f"{plan.launcher}: for when {mode.program}; {mode.starts}"),
        ("tasks per node", f"{plan.tasks_per_node}, {plan.cpus_per_task} CPU(s) and "
                           f"{plan.gpus_per_node} GPU(s) each" if mode.name == "per-node" else
                           str(plan.tasks_per_node)),
        ("CPUs per node", f"{plan.cpus_per_node} ({plan.cpus_per_task} per task)"),
        ("memory per node", f"{plan.mem_mb} MB"),
        ("time", plan.time),
        ("reserves", reserved(plan)),
    ]
    for k, v in rows:
        t.add_row(k, v)
    err_console.print(t)
    show_notes(plan)


def reserved(plan: JobPlan) -> str:
    """What the job holds at most, in GPU-hours (a job without GPUs: its nodes' CPU time)."""
    segments = f" x {plan.chain} segments" if plan.chain > 1 else ""
    if plan.total_gpus:
        return (f"{plan.gpu_hours:,.1f} GPU-hours at most ({plan.total_gpus} GPU(s) x "
                f"{plan.time}{segments})")
    cpus = plan.nodes * plan.cpus_per_node
    hours = cpus * plan.time_seconds / 3600 * max(plan.chain, 1)
    return f"{hours:,.1f} CPU-hours at most ({cpus} CPU(s) x {plan.time}{segments})"


def summary_line(plan: JobPlan) -> str:
    """The plan in one line: what a pipe's reader still hears of it on stderr."""
    gpus = f"{plan.gpus_per_node} x {plan.gpu_type}" if plan.gpu_type else str(plan.gpus_per_node)
    return (f"{plan.profile} ({plan.cluster}), partition {plan.partition}: {plan.nodes} node(s) "
            f"x {gpus} GPU(s) = {plan.total_gpus}, launcher {plan.launcher}, {plan.cpus_per_node} "
            f"CPUs and {plan.mem_mb} MB per node, time {plan.time}; {reserved(plan)}")


def show_notes(plan: JobPlan) -> None:
    """The plan's notes (a constraint added, a default chosen) on stderr."""
    for note in plan.notes:
        print_err(note, lead="note:", style="yellow")


def show_script(script: str) -> None:
    """The script on stdout: highlighted for a person, plain text for a pipe."""
    print_code(script, "bash")


def show_scripts(scripts: Sequence[Script]) -> None:
    """The scripts on stdout; several each under a comment naming it (still one bash text)."""
    if len(scripts) == 1:
        print_code(scripts[0].text, "bash")
        return
    for s in scripts:
        where = f": {s.path}" if s.path else ""
        print_code(f"# ===== {s.label}{where} =====\n{s.text}", "bash")


def _show_verdict(verdict: TestOnlyVerdict) -> None:
    if verdict.accepted:
        err_console.print(f"[green]SLURM accepts the script:[/] {verdict.message}")
        starts = verdict_dict(verdict)["starts"]
        if starts:
            err_console.print(f"expected start: {starts}", highlight=False)
    else:
        err_console.print(f"[red]SLURM refuses the script:[/] {verdict.message}")
        import typer

        raise typer.Exit(1)


def write_script(output: Path, script: str, force: bool = False) -> None:
    """Write the script to `output` whole, or leave what was there untouched and say why."""
    from hpctrain.errors import HpctrainError
    from hpctrain.files.atomic import write_atomic

    # Through a symlink to its file, as a plain write would, not over the link itself.
    target = Path(os.path.realpath(output))
    if target.is_dir():
        raise HpctrainError(
            f"cannot write {output}: it is a directory",
            f"give a file name, e.g. -o {output}/job.sh",
        )
    if not force and os.path.lexists(output):
        # As `profiles discover -o`: a file written by hand is not lost to a typo.
        raise HpctrainError(f"{output} exists", "pass --force to replace it, or choose another -o")
    try:
        write_atomic(target, script, mode=0o755)
    except FileNotFoundError:
        raise HpctrainError(
            f"cannot write {output}: directory {target.parent} does not exist",
            f"create it first (mkdir -p {target.parent}) or choose another -o path",
        ) from None
    except NotADirectoryError:
        raise HpctrainError(
            f"cannot write {output}: part of its directory path is a file",
            "choose another -o path",
        ) from None
    except OSError as e:
        raise HpctrainError(
            f"cannot write {output}: {e.strerror or e}", "choose a writable path for -o"
        ) from None


def _log_dir(output_dir: str) -> Path:
    """The profile's output directory as submit resolves it: absolute, from this directory."""
    return Path(os.path.abspath(Path(output_dir).expanduser()))


def _make_log_dir(output: Path, logs: Path) -> None:
    """Create the log directory the script written to `output` names, or say what to do."""
    from hpctrain.errors import HpctrainError

    try:
        logs.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise HpctrainError(
            f"wrote {output}, but cannot create its log directory {logs}: {e.strerror or e}",
            f"create it before sbatch (mkdir -p {shlex.quote(str(logs))})") from None


def _tell_log_dir(output_dir: str) -> None:
    """A script on stdout logs into `output_dir` from where sbatch runs: say to create it."""
    if _log_dir(output_dir).is_dir():
        return
    where = shlex.quote(output_dir)
    print_err(
        f"SLURM writes the job's output into {output_dir}/ (from the directory sbatch runs in) "
        f"and does not create it: run `mkdir -p {where}` there before sbatch, or render with "
        "-o FILE, which creates it", lead="note:", style="yellow")


# render's own options, which `submit` would not take with a -o script's job.
_RENDER_ONLY = {"-o": True, "--output": True, "--force": False, "--check": False,
                "--json": False, "--dry-run": False}


def submit_line(args: Sequence[str]) -> str | None:
    """`hpctrain submit` with the job options of `args` (a `render` command line, after the
    program's name): the same job, recorded; None where the line is not one to rewrite."""
    if "render" not in args:
        return None
    rest = list(args[args.index("render") + 1:])
    trainer = [trainer_option(f) for f in TRAINER_FLAGS]
    parsed = argv.parse(rest, [*job_table(), *OWN], trainer)
    if parsed is None:
        return None
    # The options end where the job's command begins (after `--`, which they keep).
    options, command = rest[:len(rest) - len(parsed[1])], rest[len(rest) - len(parsed[1]):]
    kept, i = [], 0
    while i < len(options):
        name, eq, _ = options[i].partition("=")
        if name in _RENDER_ONLY and options[i] != "--":
            i += 2 if _RENDER_ONLY[name] and not eq else 1
            continue
        kept.append(options[i])
        i += 1
    return "hpctrain " + shlex.join(["submit", *kept, *command])


def _devcluster_conf(profile: Profile) -> Path | None:
    """The dev cluster's slurm.conf where a plain sbatch here would need it: hpctrain finds
    the dev cluster by itself, sbatch only through SLURM_CONF."""
    from hpctrain import places
    from hpctrain.files import paths

    if os.environ.get("SLURM_CONF") or places.elsewhere([profile]):
        return None
    return paths.published_slurm_conf()


def _tell_how_to_submit(output: Path, profile: Profile) -> None:
    """After `-o FILE`: how to submit it so that status, logs and why follow the job, and the
    SLURM_CONF a plain sbatch of it needs on the dev cluster."""
    submit = submit_line(sys.argv[1:]) or "the same command line with `submit` for `render`"
    print_err(f"a plain `sbatch {shlex.quote(str(output))}` is not in hpctrain's history; for "
              f"status, logs and why to follow the job, submit it with {submit}",
              lead="note:", style="yellow")
    conf = _devcluster_conf(profile)
    if conf is not None:
        from hpctrain.devcluster.state import export_line

        print_err(f"a plain sbatch reaches the dev cluster only through SLURM_CONF: first "
                  f"{export_line(conf)}", lead="note:", style="yellow")


def run_plain(args: Sequence[str]) -> bool:
    """Run `render ARGS` where its command line needs no click (cli/argv.py); False: it does."""
    return argv.run_job(args, OWN, render_job)


def render_job(job: JobOptions, output: Path | None = None, dry_run: bool = False,
               check: bool = False, first_of: str | None = None, json_out: bool = False,
               force: bool = False) -> None:
    """Render the sbatch script for a profile and topology; nothing is submitted."""
    from hpctrain.submission.kinds import submission

    if output is not None and str(output) == "-":
        output = None
    request = replace(build_request(job), preview=True)
    # --check asks the profile's SLURM: here, or through its login's one connection.
    client = backends.place_for(request.profile).slurm_client() if check else None
    if client is not None:
        from hpctrain.submission.maintenance import with_maintenance

        request = with_maintenance(request, client=client)
    logs = _log_dir(request.profile.output_dir)
    if output is not None:
        # SLURM opens --output before the script runs and creates no directory for it; a
        # relative one would be resolved against wherever sbatch runs.
        request = replace(request, log_dir=str(logs))
    # The kind submit would use decides the scripts: one, or each alternative of a race.
    scripts = submission(request, first_of).preview()
    if output is not None and len(scripts) > 1:
        raise HpctrainError("--output and --first-of do not mix: each alternative has a script",
                            "use `hpctrain submit --first-of ... --dry-run`, or render one "
                            "topology at a time")
    verdicts = ask_slurm([s.text for s in scripts], required=True, client=client) if client \
        else None
    cost = charged(client, scripts[0].plan.account) if client else None
    if output is not None:
        write_script(output, scripts[0].text, force)
        _make_log_dir(output, logs)
    if json_out:
        shown = render_dict(first_of, output, [
            (s.plan, s.text, verdicts[i] if verdicts else None) for i, s in enumerate(scripts)])
        print_json({**shown, "usage": cost.as_dict()} if cost else shown)
    else:
        _show_rendered(scripts, output, logs)
    if output is None:
        _tell_log_dir(request.profile.output_dir)
    elif len(scripts) == 1:
        _tell_how_to_submit(output, request.profile)
    if cost is not None and not json_out:
        show_usage(request.profile.name, cost)
    if verdicts is not None:
        _show_verdicts(verdicts)


def _show_rendered(scripts: Sequence[Script], output: Path | None, logs: Path) -> None:
    """The scripts on stdout (or where they went), their plans on stderr."""
    plans = [s.plan for s in scripts]
    if len(scripts) > 1:
        show_scripts(scripts)
        show_alternatives(plans, None)
    elif output is not None:
        print_err(f"wrote {output}; the job logs into {logs}/")
        show_summary(plans[0])
    else:
        show_script(scripts[0].text)
        if is_tty():
            show_summary(plans[0])
        else:
            # stdout is the script alone, for a file or sbatch; what a person must know still
            # reaches the terminal.
            print_err(summary_line(plans[0]))
            show_notes(plans[0])


def _show_verdicts(verdicts: Sequence[TestOnlyVerdict]) -> None:
    """SLURM's answer to each script; exit 1 if it refuses one."""
    if len(verdicts) == 1:
        _show_verdict(verdicts[0])
        return
    refused = [v for v in verdicts if not v.accepted]
    # A race needs every alternative: one refused fails the render.
    if refused:
        err_console.print(f"[red]SLURM refuses {len(refused)} alternative(s)[/]; "
                          "a race needs every one to be possible")
        import typer

        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add render to the root app."""
    app.command(
        name="render", context_settings={"allow_interspersed_args": False},
        epilog="Example: hpctrain render --profile raven --nodes 2 -- python train.py",
    )(job_command(__name__, "render_job", OWN))
