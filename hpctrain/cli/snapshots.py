"""`hpctrain gc`: the code snapshots no recorded job still needs (docs/jobs.md, "Code
snapshots")."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hpctrain.cli import backends
from hpctrain.cli.output import console, print_json

if TYPE_CHECKING:
    from hpctrain.history import JobRecord

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _store_of(record: JobRecord) -> Path | None:
    from hpctrain.snapshots.spec import STORE_DIR

    if not record.snapshot or not record.run_dir or record.login:
        return None
    return Path(record.run_dir).parent / STORE_DIR


def _needed(record: JobRecord, older_than: float | None) -> bool:
    """Unfinished jobs always need their code; finished ones unless older than asked."""
    if older_than is None or not record.terminal:
        return True
    submitted = datetime.fromisoformat(record.submitted_at)
    return datetime.now(timezone.utc) - submitted < timedelta(days=older_than)


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
    from hpctrain.snapshots import store as st

    records = backends.history().all()
    stores: dict[Path, set[str]] = {Path(s).resolve(): set() for s in store or ()}
    for r in records:
        where = _store_of(r)
        if where is not None:
            stores.setdefault(where, set())
    for r in records:
        where = _store_of(r)
        if where is not None and r.snapshot and _needed(r, older_than):
            stores[where].add(r.snapshot)
    done = [st.collect(path, keep, dry_run=dry_run, grace_s=min_age * 60)
            for path, keep in sorted(stores.items()) if (path / "manifests").is_dir()]
    if json_out:
        print_json({"dry_run": dry_run, "stores": [dataclasses.asdict(c) for c in done]})
        return
    verb = "would remove" if dry_run else "removed"
    for c in done:
        console.print(f"{c.store}: {verb} {len(c.snapshots)} snapshot(s) and {c.objects} "
                      f"file(s) ({c.bytes / 2**20:.1f} MiB); kept {c.kept} snapshot(s)",
                      highlight=False, soft_wrap=True)
    if not done:
        console.print("No snapshot store found (none of the recorded jobs has one).",
                      highlight=False)


def register(app: typer.Typer) -> None:
    """Add gc to the root app."""
    app.command(epilog="Example: hpctrain gc --older-than 30 --dry-run")(gc)
