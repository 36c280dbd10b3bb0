"""`hpctrain profiles`: list, show, validate, discover, check and probe cluster profiles."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from hpctrain.cli import completion, display
from hpctrain.cli.flags import JsonOpt
from hpctrain.cli.login import LoginOpt
from hpctrain.cli.options import job_option
from hpctrain.cli.output import (
    console,
    err_console,
    is_tty,
    plain_columns,
    print_code,
    print_json,
)

profiles_app = typer.Typer(
    name="profiles",
    help="List, show and validate cluster profiles; discover one from a live cluster, check "
    "one against it, probe a compute node.\n\nExample: hpctrain profiles show raven",
    no_args_is_help=True,
    rich_markup_mode=None,
)

ProfileArg = Annotated[str, typer.Argument(help="Profile name or YAML file.",
                                           autocompletion=completion.profile_names)]


@profiles_app.command("list", epilog="Example: hpctrain profiles list --json")
def list_(json_out: JsonOpt = False) -> None:
    """List the shipped and user profiles."""
    from hpctrain.profiles import list_profiles, load_profile_file

    rows = []
    for info in list_profiles():
        try:
            prof = load_profile_file(info.path)
            desc, parts, err = prof.description, [p.name for p in prof.partitions], None
        except Exception as e:  # a broken user profile must not hide the others
            desc, parts, err = "", [], str(e)
        rows.append(
            {
                "name": info.name,
                "source": info.source,
                "path": str(info.path),
                "overrides_shipped": info.shadows_shipped,
                "description": desc,
                "partitions": parts,
                "error": err,
            }
        )
    if json_out:
        print_json(rows)
        return
    _show_list(rows)


def _show_list(rows: list[dict[str, Any]]) -> None:
    """A table for a person; aligned plain columns for a pipe (never boxed, never folded)."""
    cells = [(str(r["name"]),
              str(r["source"]) + (" (overrides shipped)" if r["overrides_shipped"] else ""),
              ", ".join(r["partitions"]),
              f"invalid: {r['error']}" if r["error"] else str(r["description"])) for r in rows]
    columns = ("NAME", "SOURCE", "PARTITIONS", "DESCRIPTION")
    if not is_tty():
        sys.stdout.write(plain_columns(columns, cells))
        return
    from rich.markup import escape
    from rich.table import Table

    t = Table(*columns)
    for r, row in zip(rows, cells, strict=True):
        desc = f"[red]{escape(row[3])}[/]" if r["error"] else escape(row[3])
        t.add_row(*(escape(c) for c in row[:3]), desc)
    console.print(t)


@profiles_app.command(epilog="Example: hpctrain profiles show gilbreth")
def show(
    name: ProfileArg,
    json_out: JsonOpt = False,
) -> None:
    """Show a profile, fully resolved (after `extends:` and defaults)."""
    from dataclasses import asdict

    import yaml

    from hpctrain.profiles import load_profile

    data = asdict(load_profile(name))
    if json_out:
        print_json(data)
    else:
        print_code(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), "yaml")


@profiles_app.command(epilog="Example: hpctrain profiles validate ~/my-raven.yaml")
def validate(
    file: Annotated[Path, typer.Argument(help="Profile YAML file to check, or a profile's name.",
                                         autocompletion=completion.profile_names)],
    json_out: JsonOpt = False,
) -> None:
    """Check a profile (a file, or a name); every problem is reported with the field and file."""
    from hpctrain.errors import ProfileError
    from hpctrain.profiles import load_profile_file
    from hpctrain.profiles.loader import profile_path

    try:
        # A name that is no file here is the profile of that name (its file is checked).
        file = file if file.exists() else profile_path(str(file))
        prof = load_profile_file(file)
    except ProfileError as e:
        if not json_out:
            raise
        # A script asked for JSON: the verdict as JSON too, one problem a line, and exit 1.
        print_json({"valid": False, "path": str(file), "problems": e.what.splitlines(),
                    "fix": e.fix, "error": {"what": e.what, "fix": e.fix}})
        err_console.print(f"Error: {e.what}", highlight=False, markup=False)
        raise typer.Exit(1) from None
    if json_out:
        print_json({"valid": True, "name": prof.name, "path": str(file)})
    else:
        err_console.print(f"[green]{file}: valid[/] (profile {prof.name}, cluster {prof.cluster})")


_PROFILE_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


def _facts() -> tuple[Any, Any]:
    """The SLURM client and what the live cluster says (partitions, nodes, QOS, accounts)."""
    import getpass

    from hpctrain.cli import backends
    from hpctrain.profiles.discover import read_cluster

    client, _cluster = backends.slurm()
    return client, read_cluster(client, getpass.getuser())


@profiles_app.command(epilog="Example: hpctrain profiles discover mycluster -o mycluster.yaml")
def discover(
    name: Annotated[str | None, typer.Argument(help="Name of the new profile "
                                                  "(default: the cluster's name).")] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write the profile "
                      "here (default: print it).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --output.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Draft a profile from the live cluster (run it on a login node); unknowns are marked."""
    import re
    from datetime import date

    from hpctrain.errors import ProfileError
    from hpctrain.profiles.discover import draft_profile, draft_yaml

    if name is not None and not re.match(_PROFILE_NAME, name):
        raise ProfileError(f"profile name {name!r} must be letters, digits, '_', '.', '-'",
                           "e.g. `hpctrain profiles discover mycluster`")
    if output is not None and output.exists() and not force:
        raise ProfileError(f"{output} exists", "pass --force to replace it, or choose another -o")
    _client, facts = _facts()
    default = re.sub(r"[^A-Za-z0-9_.-]+", "-", facts.cluster or "").strip("-.") or "discovered"
    draft = draft_profile(facts, name or default, when=date.today().isoformat())
    text = draft_yaml(draft)
    if output is not None:
        _write_profile(output, text)
    if json_out:
        print_json({**draft.as_dict(), "written": str(output) if output else None})
    elif output is None:
        print_code(text, "yaml")
    for note in draft.notes:
        err_console.print(f"[yellow]note:[/] {note}", highlight=False)
    if output is not None and not json_out:
        err_console.print(f"[green]wrote {output}[/]: {len(draft.review)} field(s) to review "
                          "(REVIEW comments at its top)", highlight=False)


def _write_profile(output: Path, text: str) -> None:
    """Write atomically, then read it back through the loader (a broken draft is a bug)."""
    from hpctrain.errors import ProfileError
    from hpctrain.files.atomic import write_atomic
    from hpctrain.profiles import load_profile_file

    try:
        write_atomic(output, text)
    except OSError as e:
        raise ProfileError(f"cannot write {output}: {e.strerror or e}",
                           "choose a writable path with -o") from None
    load_profile_file(output)


@profiles_app.command(epilog="Example: hpctrain profiles check raven --json")
def check(
    name: ProfileArg,
    json_out: JsonOpt = False,
) -> None:
    """Hold a profile against the live cluster; exit 1 when a difference would fail jobs."""
    from hpctrain.profiles import load_profile
    from hpctrain.profiles.check import check_profile

    profile = load_profile(name)
    _client, facts = _facts()
    report = check_profile(profile, facts)
    if json_out:
        print_json(report.as_dict())
    else:
        _show_report(report)
    if report.fatal:
        raise typer.Exit(1)


def _show_report(report: Any) -> None:
    for d in report.differences:
        tag = "[red]FATAL[/]" if d.fatal else "[yellow]differs[/]"
        console.print(f"{tag} {d.where}: {d.message}", highlight=False)
        console.print(f"      fix: {d.fix}", highlight=False)
    for note in report.notes:
        err_console.print(f"[yellow]note:[/] {note}", highlight=False)
    fatal = sum(d.fatal for d in report.differences)
    if not report.differences:
        err_console.print(f"[green]{report.profile} matches cluster {report.cluster}[/]",
                          highlight=False)
    else:
        err_console.print(f"{len(report.differences)} difference(s), {fatal} fatal",
                          highlight=False)


@profiles_app.command(epilog="Example: hpctrain profiles probe raven --partition gpudev")
def probe(
    name: Annotated[str, typer.Argument(help="Profile name (a shipped one or yours).",
                                        autocompletion=completion.profile_names)],
    partition: Annotated[str | None, job_option("partition")] = None,
    account: Annotated[str | None, job_option("account")] = None,
    qos: Annotated[str | None, job_option("qos")] = None,
    login: LoginOpt = None,
    dry_run: display.DryRunOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Run a one-minute job that reports IB interfaces, HCAs, GPUs and the CUDA driver, and
    write what it found into your profile (one that extends the shipped one)."""
    from dataclasses import asdict

    from hpctrain.cli import backends
    from hpctrain.errors import ProfileError
    from hpctrain.plan import JobRequest
    from hpctrain.profiles import list_profiles, load_profile
    from hpctrain.profiles import probe as pr
    from hpctrain.slurm.sbatch_options import input_variables
    from hpctrain.submission.kinds import ProbeKind
    from hpctrain.submission.pipeline import run

    infos = {i.name: i for i in list_profiles()}
    if name not in infos:
        load_profile(name)  # the loader's error: unknown profile, and the known ones
        raise ProfileError(f"probe takes a profile name, not a file: {name!r}",
                           "put the file in your profile directory and give its name")
    profile = load_profile(name)
    part = profile.partition(partition) if partition else profile.default_partition
    req = JobRequest(profile=profile, partition=partition, account=account, qos=qos,
                     gpus_per_node=part.most_gpus if part else None,
                     shell=input_variables(os.environ))

    def submitted(done: Any) -> None:
        err_console.print(f"probe job {done.job_id} submitted; waiting for it "
                          f"(Ctrl-C stops waiting, not the job)", highlight=False)

    kind = ProbeKind(req, on_submit=submitted)
    place = backends.place_for(profile, login)
    outcome = run(kind, place, backends.history(), dry_run)
    if outcome.result is None:
        display.show(outcome, place, json_out)
        return
    done, text = outcome.result
    findings = pr.parse_findings(text)
    shipped = infos[name].source == "shipped" or infos[name].shadows_shipped
    written = pr.write_findings(name, shipped, findings)
    if json_out:
        print_json({"job_id": done.job_id, "findings": asdict(findings),
                    "written": str(written.path) if written.path else None,
                    "settings": written.settings, "kept": written.kept})
        return
    _show_probe(findings, written)


def _show_probe(findings: Any, written: Any) -> None:
    for line in findings.summary():
        console.print(f"- {line}", highlight=False)
    if written.path is None:
        console.print("nothing to write: no InfiniBand interface or HCA was seen on the node "
                      "(NCCL keeps autodetecting)", highlight=False)
        return
    for k, v in written.settings.items():
        console.print(f"wrote nccl.{k}: {v}", highlight=False)
    for k, v in written.kept.items():
        console.print(f"kept your nccl.{k}: {v} (the node suggests otherwise)", highlight=False)
    console.print(f"profile file: {written.path}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add the `profiles` group to the root app."""
    app.add_typer(profiles_app)
