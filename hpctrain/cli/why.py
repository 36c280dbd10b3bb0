"""`hpctrain why [JOB]`: why a job failed, waits or wasted its resources (docs/why.md)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated

import typer

from hpctrain.cli import backends
from hpctrain.cli.flags import JsonOpt
from hpctrain.cli.output import console, print_json

if TYPE_CHECKING:
    from hpctrain.tracking.why import Why


def _show(found: Why) -> None:
    d = found.diagnosis
    state = f" ({found.state})" if found.state else ""
    console.print(f"Job {found.job_id}{state}", highlight=False)
    mark = "" if d.certain else " (not certain: what was found is below)"
    console.print(f"why:  {d.summary}{mark}", highlight=False, soft_wrap=True)
    console.print(f"fix:  {d.fix}", highlight=False, soft_wrap=True)
    if d.evidence:
        console.print("evidence:", highlight=False)
        for line in d.evidence:
            console.print(f"  {line}", highlight=False, soft_wrap=True, markup=False)
    if found.advice:
        console.print("next time:", highlight=False)
        for a in found.advice:
            verdict = a.suggestion or "fine as asked"
            console.print(f"  {a.what}: {a.used}; asked for {a.asked}: {verdict}",
                          highlight=False, soft_wrap=True, markup=False)
    from hpctrain.cli.jobview import attempt_lines, startup_lines

    for line in attempt_lines([dataclasses.asdict(a) for a in found.attempts]):
        console.print(line, highlight=False, soft_wrap=True, markup=False)
    if found.startup is None:
        return
    from hpctrain.slurm.states import parse_state

    ended = found.state is not None and parse_state(found.state).is_terminal
    for line in startup_lines(found.startup, ended):
        console.print(line, highlight=False, soft_wrap=True, markup=False)


def why(
    job: Annotated[str | None, typer.Argument(
        help="The job to explain (an id from the history; default: the last job submitted).")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Why a job failed, waits or wasted what it asked for: one diagnosis with the lines it
    stands on, one fix, and what to ask for next time."""
    from hpctrain.tracking import selection
    from hpctrain.tracking.why import why as explain

    history = backends.history()
    record = selection.pick(history, job)
    found = explain(record, backends.place_for(record))
    if json_out:
        print_json(found.as_dict())
        return
    _show(found)


def register(app: typer.Typer) -> None:
    app.command(epilog="Example: hpctrain why 4711 (no id: the last job)")(why)
