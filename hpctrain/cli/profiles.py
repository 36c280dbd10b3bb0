"""`hpctrain profiles`: list, show and validate cluster profiles."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hpctrain.cli.output import console, err_console, print_code, print_json

profiles_app = typer.Typer(
    name="profiles",
    help="List, show and validate cluster profiles.\n\nExample: hpctrain profiles show raven",
    no_args_is_help=True,
    rich_markup_mode=None,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


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
    from rich.table import Table

    t = Table("name", "source", "partitions", "description")
    for r in rows:
        src = str(r["source"]) + (" (overrides shipped)" if r["overrides_shipped"] else "")
        desc = f"[red]invalid: {r['error']}[/]" if r["error"] else str(r["description"])
        t.add_row(str(r["name"]), src, ", ".join(r["partitions"]), desc)  # type: ignore[arg-type]
    console.print(t)


@profiles_app.command(epilog="Example: hpctrain profiles show gilbreth")
def show(
    name: Annotated[str, typer.Argument(help="Profile name or YAML file.")],
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
    file: Annotated[Path, typer.Argument(help="Profile YAML file to check.")],
    json_out: JsonOpt = False,
) -> None:
    """Check a profile file; every problem is reported with the field and file."""
    from hpctrain.profiles import load_profile_file

    prof = load_profile_file(file)
    if json_out:
        print_json({"valid": True, "name": prof.name, "path": str(file)})
    else:
        err_console.print(f"[green]{file}: valid[/] (profile {prof.name}, cluster {prof.cluster})")


def register(app: typer.Typer) -> None:
    """Add the `profiles` group to the root app."""
    app.add_typer(profiles_app)
