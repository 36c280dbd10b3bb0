"""Which tracked jobs a command is about: a listing's selection, or the one job to follow."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from hpctrain.errors import HpctrainError
from hpctrain.history import History, JobRecord

RECENT = 20


def _not_tracked(history: History, job_ids: Sequence[str]) -> HpctrainError:
    verb = "is" if len(job_ids) == 1 else "are"
    return HpctrainError(
        f"job {', '.join(job_ids)} {verb} not in the history ({history.path})",
        "hpctrain tracks only jobs it submitted; `hpctrain status --all` lists them",
    )


def select(
    history: History, job_ids: Sequence[str] = (), *, all_jobs: bool = False, last: int = RECENT
) -> list[JobRecord]:
    """The jobs a listing shows: the given ids, everything, or unfinished + the `last` newest."""
    if job_ids:
        records = history.by_job_ids(job_ids)
        missing = [j for j in dict.fromkeys(job_ids) if j not in {r.job_id for r in records}]
        if missing:
            raise _not_tracked(history, missing)
        return records
    return history.all() if all_jobs else history.recent(last)


def pick(history: History, job_id: str | None) -> JobRecord:
    """The job with this id (the newest if several clusters used it), or the last submitted."""
    if job_id is None:
        last = history.last()
        if last is None:
            raise HpctrainError(
                "no job has been submitted yet", "submit one with `hpctrain submit --profile ...`"
            )
        return last
    found = history.by_job_ids([job_id])
    if not found:
        raise _not_tracked(history, [job_id])
    return found[-1]


def unfinished(history: History, cluster: str) -> list[JobRecord]:
    """Every job of `cluster` the history does not know to have ended (cancel --all)."""
    return [r for r in history.unfinished() if r.cluster == cluster]


def with_chains(history: History, records: Sequence[JobRecord]) -> list[JobRecord]:
    """The records plus every other job of the chains they belong to (cancel takes them all)."""
    out = {r.id: r for r in records}
    for r in records:
        if r.chain_head is not None:
            out.update((c.id, c) for c in history.chain(r.cluster, r.chain_head))
    return sorted(out.values(), key=lambda r: r.id)


# metrics.json stays small (a few KB per epoch at most); a larger file is not the trainer's.
_MAX_METRICS_BYTES = 8 << 20


def restarts(record: JobRecord) -> int | None:
    """How often the job was requeued, as its trainer recorded it; None when unknown."""
    if not record.run_dir:
        return None
    path = Path(record.run_dir) / "metrics.json"
    try:
        if path.stat().st_size > _MAX_METRICS_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    entries = data.get("restarts") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    starts = sum(1 for e in entries
                 if isinstance(e, dict) and e.get("slurm_job_id") == record.job_id)
    return starts - 1 if starts else None
