"""`hpctrain devcluster`: a real local SLURM that emulates a cluster profile."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from hpctrain.cli.flags import JsonOpt
from hpctrain.cli.output import console, err_console, print_json

if TYPE_CHECKING:
    from hpctrain.devcluster.state import UpResult

devcluster_app = typer.Typer(
    name="devcluster",
    help="A real SLURM (with accounting) on this machine that emulates a cluster profile.\n\n"
    "Example: sudo hpctrain devcluster up --profile raven",
    no_args_is_help=True,
)



def _progress(msg: str) -> None:
    err_console.print(f"[dim]- {msg}[/]", highlight=False)


def up_verb(res: UpResult) -> str:
    """What `up` did, in a few words: already running, repaired, switched, or up."""
    took = f"{res.seconds:.1f} s"
    if res.already_running:
        return "already running"
    if res.replaced is not None:
        was, nodes = res.replaced.get("profile"), res.replaced.get("nodes_per_partition")
        if was != res.profile:
            return f"switched from profile {was} to {res.profile} in {took}"
        if nodes != res.nodes_per_partition:
            return (f"restarted with {res.nodes_per_partition} node(s) per partition "
                    f"(was {nodes}) in {took}")
        # Same profile and size: its generated configuration changed (an edited profile).
        return f"restarted with its new configuration in {took}"
    if res.repaired:
        return f"repaired in {took} (started {', '.join(res.started)})"
    return f"up in {took}"


@devcluster_app.command(epilog="Example: hpctrain devcluster up --profile gilbreth --nodes 1")
def up(
    profile: Annotated[
        str, typer.Option("--profile", "-P", help="Profile to emulate (name or YAML file).")
    ] = "local",
    nodes: Annotated[
        int, typer.Option("--nodes", "-N", min=1, help="Nodes per partition (per node shape).")
    ] = 2,
    replace: Annotated[
        bool,
        typer.Option("--replace", help="Restart a cluster running another profile or size."),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Start the dev cluster (a no-op if it already runs this profile)."""
    from hpctrain.devcluster import DevCluster

    res = DevCluster().up(profile, nodes, replace=replace, progress=_progress)
    if json_out:
        print_json(res.as_dict())
        return
    console.print(
        f"Dev cluster {up_verb(res)}: profile [bold]{res.profile}[/], "
        f"{len(res.node_names)} node(s): {', '.join(res.node_names)}",
        highlight=False,
    )
    console.print("hpctrain finds it by itself; for raw sinfo/sbatch run:", highlight=False)
    typer.echo(res.export_line)


@devcluster_app.command(epilog="Example: hpctrain devcluster status --json")
def status(json_out: JsonOpt = False) -> None:
    """Show the dev cluster's daemons, emulated profile and sinfo (exit 1 if not healthy)."""
    from hpctrain.devcluster import DevCluster

    st = DevCluster().status()
    if json_out:
        print_json(st.as_dict())
    else:
        from rich.table import Table

        if st.running:
            head = f"Dev cluster running: profile [bold]{st.profile}[/], " + (
                "healthy" if st.healthy else "[red]degraded[/] (run `hpctrain devcluster up`)"
            )
        else:
            head = "Dev cluster not running (start it with `hpctrain devcluster up`)"
        console.print(head, highlight=False)
        console.print(f"directory: {st.directory}", highlight=False)
        t = Table("daemon", "pid", "state")
        for d in st.daemons:
            t.add_row(d.name, str(d.pid or "-"), "[green]alive[/]" if d.alive else "[red]dead[/]")
        console.print(t)
        if st.sinfo:
            typer.echo(st.sinfo)
        if st.running:
            from hpctrain.devcluster.state import export_line

            typer.echo(export_line(st.slurm_conf))
    if not st.healthy:
        raise typer.Exit(1)


@devcluster_app.command(epilog="Example: hpctrain devcluster down")
def down(json_out: JsonOpt = False) -> None:
    """Stop the daemons `up` started (verified by pid file and /proc), nothing else."""
    from hpctrain.devcluster import DevCluster

    stopped = DevCluster().down(progress=_progress)
    if json_out:
        print_json([{"name": n, "pid": p} for n, p in stopped])
        return
    if stopped:
        console.print(f"Stopped {len(stopped)} daemon(s).", highlight=False)
    else:
        console.print("Nothing of the dev cluster was running.", highlight=False)


def register(app: typer.Typer) -> None:
    """Add `hpctrain devcluster` to the root app."""
    app.add_typer(devcluster_app)
