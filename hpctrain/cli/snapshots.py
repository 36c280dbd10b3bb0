"""`hpctrain diff` (what differs between two runs), `rerun` (a job again, on its snapshot) and
`gc` (the code snapshots no recorded job still needs): docs/jobs.md, "Code snapshots"."""

from __future__ import annotations

import dataclasses
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hpctrain.cli import backends
from hpctrain.cli.display import DryRunOpt, show
from hpctrain.cli.flags import JsonOpt
from hpctrain.cli.options import job_option
from hpctrain.cli.output import console, print_json

if TYPE_CHECKING:
    from hpctrain.history import JobRecord
    from hpctrain.places import Place
    from hpctrain.studies.compare import Change, Comparison, Reader


def _store_of(record: JobRecord) -> Path | None:
    from hpctrain.snapshots.spec import store_of

    if not record.snapshot or not record.run_dir:
        return None
    return store_of(Path(record.run_dir))


def _needed(record: JobRecord, older_than: float | None) -> bool:
    """Unfinished jobs always need their code; finished ones unless older than asked."""
    if older_than is None or not record.terminal:
        return True
    submitted = datetime.fromisoformat(record.submitted_at)
    return datetime.now(timezone.utc) - submitted < timedelta(days=older_than)


def _stores(older_than: float | None, named: list[Path]
            ) -> list[tuple[Place, dict[Path, set[str]]]]:
    """Each place's stores, each with the snapshots its recorded jobs still need (the stores
    --store names are this machine's)."""
    from hpctrain import places

    local = backends.local_place()
    found: dict[int, tuple[Place, dict[Path, set[str]]]] = {
        id(local): (local, {Path(s).resolve(): set() for s in named})}
    for place, group in places.by_place(backends.history().all(), local):
        stores = found.setdefault(id(place), (place, {}))[1]
        for r in group:
            if (where := _store_of(r)) is not None:
                keep = stores.setdefault(where, set())
                if _needed(r, older_than):
                    keep.add(str(r.snapshot))
    return list(found.values())


def gc(
    older_than: Annotated[
        float | None, typer.Option("--older-than", metavar="DAYS", min=0,
                                   help="Also drop the snapshots of jobs that ended and were "
                                   "submitted more than DAYS ago.")] = None,
    store: Annotated[
        list[Path] | None, typer.Option("--store", help="A store to clean besides those of "
                                        "the recorded jobs (<output_dir>/.snapshots).")] = None,
    min_age: Annotated[
        float, typer.Option("--min-age", metavar="MINUTES", min=0,
                            help="Never remove what was made in the last MINUTES: a submit "
                            "may be freezing it right now.")] = 60.0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would go; remove "
                                          "nothing.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Remove code snapshots no recorded job still needs, and the files only they held."""
    done = [(place, c) for place, found in _stores(older_than, store or [])
            for path, keep in sorted(found.items())
            if (c := place.collect_code(path, keep, min_age * 60, dry_run)) is not None]
    if json_out:
        print_json({"dry_run": dry_run, "stores": [
            {"login": place.login, **dataclasses.asdict(c)} for place, c in done]})
        return
    verb = "would remove" if dry_run else "removed"
    for place, c in done:
        console.print(f"{place.shown(c.store)}: {verb} {len(c.snapshots)} snapshot(s) and "
                      f"{c.objects} file(s) ({c.bytes / 2**20:.1f} MiB); kept {c.kept} snapshot(s)",
                      highlight=False, soft_wrap=True)
    if not done:
        console.print("No snapshot store found (none of the recorded jobs has one).",
                      highlight=False)


def _reader(record: JobRecord) -> Reader:
    """Files of the job's run directory and store, read where the job was submitted."""
    place = backends.place_for(record)

    def read(path: Path) -> bytes | None:
        got = place.read_file(path, None)
        return None if got is None else got[0]

    return read


def diff(
    job_a: Annotated[str, typer.Argument(help="A job id (the first run).")],
    job_b: Annotated[str, typer.Argument(help="Another job id (the second run).")],
    json_out: JsonOpt = False,
) -> None:
    """What differs between two runs: code (a unified diff), settings, topology, Python
    packages, profile."""
    from hpctrain.studies.compare import compare, read_facts
    from hpctrain.tracking import selection

    history = backends.history()
    records = [selection.pick(history, job) for job in (job_a, job_b)]
    readers = [_reader(r) for r in records]
    facts = [read_facts(r, read) for r, read in zip(records, readers, strict=True)]
    comparison = compare(facts[0], facts[1], readers[0], readers[1])
    if json_out:
        print_json(comparison.as_dict())
        return
    _show(comparison)


def _show(c: Comparison) -> None:
    out = sys.stdout.write
    if c.same:
        out(f"Jobs {c.a} and {c.b} ran the same code, settings, topology, Python packages and "
            "profile.\n")
        return
    if c.code or c.code_note:
        out(f"code ({c.a} -> {c.b}):\n")
        out("".join(c.code) if c.code else f"  {c.code_note}\n")
    for title, changes in (("settings", c.settings), ("topology", c.topology),
                           ("environment", c.environment)):
        if changes:
            out(f"{title} ({c.a} -> {c.b}):\n" + "".join(_line(x) for x in changes))
    if c.profile:
        out(f"profile ({c.a} -> {c.b}):\n" + "".join(c.profile))


def _line(c: Change) -> str:
    return f"  {c.what}: {_value(c.a)} -> {_value(c.b)}\n"


def _value(v: object) -> str:
    import json

    return v if isinstance(v, str) else json.dumps(v)


def rerun(
    job: Annotated[str, typer.Argument(help="The job to run again.")],
    # The table's rows, each None (the job's own value) unless given; the plan checks them.
    nodes: Annotated[int | None, job_option("nodes", "Plan it again on this many nodes.")
                     ] = None,
    gpus_per_node: Annotated[int | None, job_option(
        "gpus_per_node", "Plan it again with this many GPUs per node.")] = None,
    time: Annotated[str | None, job_option(
        "time", "Plan it again with this time limit (e.g. 2:00:00).")] = None,
    dry_run: DryRunOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Submit a job again against its code snapshot, in a new run directory: the same code
    and settings, whatever was edited since. Planned again from its stored request: its
    script but for the run directory; with --nodes, --gpus-per-node or --time, changed so."""
    from hpctrain.submission.pipeline import run
    from hpctrain.submission.rerun import Changes, RerunKind
    from hpctrain.tracking import selection

    history = backends.history()
    record = selection.pick(history, job)
    place = backends.place_for(record)
    kind = RerunKind(record, Changes(nodes, gpus_per_node, time), history=history)
    show(run(kind, place, history, dry_run), place, json_out)


def register(app: typer.Typer) -> None:
    """Add diff, rerun and gc to the root app."""
    app.command(epilog="Example: hpctrain diff 1234 1240")(diff)
    app.command(epilog="Example: hpctrain rerun 1234 --nodes 2")(rerun)
    app.command(epilog="Example: hpctrain gc --older-than 30 --dry-run")(gc)
