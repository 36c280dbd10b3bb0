"""`hpctrain nodes`: the nodes a job's failure pointed at, and which are quarantined."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from hpctrain.cli import backends
from hpctrain.cli.flags import JsonOpt
from hpctrain.cli.output import console, print_json

if TYPE_CHECKING:
    from hpctrain.diagnosis.badnodes import Quarantined



def nodes(
    cluster: Annotated[
        str | None, typer.Option(help="Only this cluster's nodes (as `status` names it).")
    ] = None,
    clear: Annotated[
        list[str] | None, typer.Option("--clear", metavar="NODE",
                                       help="Forget the evidence against NODE (repeatable).")
    ] = None,
    clear_all: Annotated[
        bool, typer.Option("--clear-all", help="Forget the evidence against every node.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """List the quarantined nodes and why: NODE_FAIL, a GPU fault, stalls of two programs.
    Submits exclude them until the quarantine expires (HPCTRAIN_QUARANTINE_HOURS, default
    24) or they are cleared."""
    from hpctrain.submission.quarantine import standing

    if clear and clear_all:
        from hpctrain.errors import HpctrainError

        raise HpctrainError("--clear NODE and --clear-all both given",
                            "give --clear for some nodes, or --clear-all for every node")
    history = backends.history()
    if clear or clear_all:
        count = history.clear_suspects(cluster, None if clear_all else list(clear or []))
        if json_out:
            print_json({"cleared": count})
        else:
            console.print(f"cleared {count} piece(s) of evidence")
        return
    held, watched, hours = standing(history, cluster)
    if json_out:
        print_json({"quarantine_hours": hours, "nodes": [q.as_dict() for q in held],
                    "watched": [q.as_dict() for q in watched]})
        return
    if not held:
        console.print("no node is quarantined")
    if held or watched:
        _show(held + watched)


def _show(nodes: list[Quarantined]) -> None:
    from rich.markup import escape
    from rich.table import Table

    t = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("CLUSTER", "NODE", "STATUS", "SINCE", "UNTIL", "WHY", "JOBS"):
        t.add_column(col, overflow="fold")
    for q in nodes:
        t.add_row(*(escape(c) for c in (q.cluster, q.node,
                                         "quarantined" if q.held else "watched", q.since,
                                         q.until, ", ".join(q.reasons), ", ".join(q.jobs))))
    console.print(t)
    if not all(q.held for q in nodes):
        # A stall of one program alone may be that program's own deadlock (docs/long-runs.md).
        console.print("watched, not quarantined: one program's stall points at the node; "
                      "a second program's stall there quarantines it")
    console.print("`hpctrain nodes --clear NODE` takes a node back; `hpctrain why JOB` shows the "
                  "evidence")


def register(app: typer.Typer) -> None:
    """Add nodes to the root app."""
    app.command(epilog="Example: hpctrain nodes --clear node3")(nodes)
