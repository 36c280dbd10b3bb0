"""Which tracked jobs a command is about: a listing's selection, or the one job to follow."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpctrain.errors import HpctrainError
from hpctrain.history import History, JobRecord, StudyRecord
from hpctrain.values import rundir
from hpctrain.values.rundir import RunDir

if TYPE_CHECKING:
    from hpctrain.places import Place
    from hpctrain.tracking.overview import Overview

RECENT = 20


def _not_tracked(history: History, job_ids: Sequence[str]) -> HpctrainError:
    verb = "is" if len(job_ids) == 1 else "are"
    return HpctrainError(
        f"job {', '.join(job_ids)} {verb} not in the history ({history.path})",
        "hpctrain tracks only jobs it submitted (`hpctrain status --all` lists them): a job "
        "sent with a plain `sbatch` writes its output where the script's --output says (`scontrol "
        "show job ID` names it while SLURM remembers the job); submit it with `hpctrain submit` "
        "and the same options for status, logs and why",
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


def with_studies(history: History, records: Sequence[JobRecord]) -> list[JobRecord]:
    """The records plus every other point of the sweeps they belong to (a sweep is one row
    in a listing, counted over all of its points)."""
    out = {r.id: r for r in records}
    # Once per sweep: a listing may hold thousands of its points.
    for study in dict.fromkeys(r.study for r in records if r.study is not None):
        out.update((p.id, p) for p in history.study_jobs(study))
    return sorted(out.values(), key=lambda r: r.id)


def listing(history: History, job_ids: Sequence[str], *, all_jobs: bool, last: int,
            study: str | None) -> list[JobRecord]:
    """The jobs `status` shows: a study's (--study), else `select`'s with every race and study
    they belong to (an alternative stands for its race, a point for its sweep)."""
    if study is not None:
        return study_points(history, study)
    return with_studies(history, with_races(history, select(
        history, job_ids, all_jobs=all_jobs, last=last)))


def as_listed(history: History, records: Sequence[JobRecord], study: str | None
              ) -> list[JobRecord]:
    """The rows of a listing: a study one row, unless its own jobs were asked for."""
    if study is not None:
        return list(records)
    return one_row_per_study(records, study_labels(history))


def find_study(history: History, name: str | None, kind: str, named: str, start: str
               ) -> StudyRecord:
    """The study of this kind (scale, sweep) by name or id (None: the last of the kind);
    `named` is how the kind is called in the error, `start` how to begin one."""
    of_kind = [s for s in history.studies() if s.kind == kind]
    found = history.study(name) if name else (of_kind[-1] if of_kind else None)
    if found is None or found.kind != kind:
        raise HpctrainError(
            f"no {named} {name!r} in the history" if name else f"no {named} yet",
            f"start one with `{start}`")
    return found


def study_points(history: History, name: str) -> list[JobRecord]:
    """A study's jobs (a sweep's points, every segment of a chained one; a scaling study's
    runs), by the study's name or id."""
    study = history.study(name)
    if study is None:
        raise HpctrainError(f"no study {name!r} in the history ({history.path})",
                            "`hpctrain status` lists the studies, one row each")
    return history.study_jobs(study.id or 0)


def study_labels(history: History) -> dict[int, tuple[str, str]]:
    """Each study's id -> how its row is named (`sweep lr-bs`, `scale s1`) and its directory."""
    return {s.id: (f"{s.kind} {s.name}", s.directory) for s in history.studies()
            if s.id is not None}


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
    record = found[-1]
    if record.race_head is not None:
        # Any alternative's id stands for the run: its logs and stats are the winner's.
        return race_winner(history.race(record.cluster, record.race_head)) or record
    return record


def unfinished(history: History, cluster: str) -> list[JobRecord]:
    """Every job of `cluster` the history does not know to have ended (cancel --all)."""
    return [r for r in history.unfinished() if r.cluster == cluster]


def with_chains(history: History, records: Sequence[JobRecord]) -> list[JobRecord]:
    """The records plus every other job of the chains they belong to (cancel takes them all)."""
    return _with_groups(records, lambda r: history.chain(r.cluster, r.chain_head)
                        if r.chain_head is not None else [])


def _with_groups(records: Sequence[JobRecord],
                 group: Callable[[JobRecord], list[JobRecord]]) -> list[JobRecord]:
    out = {r.id: r for r in records}
    for r in records:
        out.update((c.id, c) for c in group(r))
    return sorted(out.values(), key=lambda r: r.id)


# metrics.json stays small (a few KB per epoch at most); a larger file is not the trainer's.
_MAX_METRICS_BYTES = 8 << 20


def restarts(record: JobRecord) -> int | None:
    """How often the job was requeued, as its trainer recorded it; None when unknown."""
    if not record.run_dir:
        return None
    path = RunDir(record.run_dir).metrics
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


def with_races(history: History, records: Sequence[JobRecord]) -> list[JobRecord]:
    """The records plus every other alternative of the races they belong to (cancel: all)."""
    return _with_groups(records, lambda r: history.race(r.cluster, r.race_head)
                        if r.race_head is not None else [])


# Alternatives that lost end CANCELLED (by the winner) or COMPLETED at once (their claim failed).
_NOT_STARTED = ("PENDING", "CANCELLED", "UNKNOWN")


# The directory the first alternative of a race to start creates in the run directory
# (templates/sbatch.sh.j2), with a file `winner`: "JOBID NODESxGPUS".


def winner(record: JobRecord) -> tuple[str, str] | None:
    """(job id, topology) of the alternative that claimed the run; None before any did (or
    before it was learned, where the run directory is not on this disk: tracking/races.py)."""
    text = record.race_winner
    if text is None and record.run_dir:
        try:
            text = RunDir(record.run_dir).race_winner.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
    return parse_claim(text or "")


def races_unlearned(records: Sequence[JobRecord]) -> list[JobRecord]:
    """The alternatives of races whose winner is not known yet and may have claimed by now."""
    return [r for r in records if r.race_head is not None and r.race_winner is None
            and r.run_dir and r.state != "PENDING"]


def parse_claim(text: str) -> tuple[str, str] | None:
    """A race's claim file, "JOBID NODESxGPUS"; None: not that."""
    parts = text.split()
    return (parts[0], parts[1]) if len(parts) == 2 else None


def race_winner(alternatives: Sequence[JobRecord]) -> JobRecord | None:
    """The alternative that claimed the run: its claim file says so, else the one that ran."""
    for r in alternatives:
        claim = winner(r)
        if claim is not None:
            return next((a for a in alternatives if a.job_id == claim[0]), None)
    ran = [a for a in alternatives if a.state not in _NOT_STARTED]
    return ran[0] if len(ran) == 1 else None


def one_row_per_race(records: Sequence[JobRecord]) -> list[JobRecord]:
    """A race's alternatives as one row: the winner, else the first one still waiting."""
    groups: dict[tuple[str, str], list[JobRecord]] = {}
    for r in records:
        if r.race_head is not None:
            groups.setdefault((r.cluster, r.race_head), []).append(r)
    shown = {}
    for group in groups.values():
        pick = race_winner(group) or next((a for a in group if not a.terminal), group[-1])
        shown[pick.id] = pick
    return [r for r in records if r.race_head is None or r.id in shown]


def job_overview(job: str | None, history: Callable[[], History],
                 place_of: Callable[[JobRecord], Place]) -> tuple[Overview, str, str | None]:
    """The overview of a tracked job (None: the last one) at its place, or of a run directory
    given on this disk; with the run directory as shown and the job id (None: a directory)."""
    from hpctrain.tracking import overview

    if job is not None and ("/" in job or Path(job).is_dir()):
        return overview.read(Path(job), None), job, None
    record = pick(history(), job)
    place = place_of(record)
    got = overview.of_record(record, place)
    if got is None or not record.run_dir:
        raise HpctrainError(f"job {record.job_id} has no run directory in the history",
                            "it was not submitted by `hpctrain submit`")
    return got, place.shown(record.run_dir), record.job_id


def monitor_summary(job: str | None, history: Callable[[], History],
                    place_of: Callable[[JobRecord], Place]
                    ) -> tuple[dict[str, Any], str, Overview]:
    """What a job's monitor sampled, summed up (with its job id), its run directory as shown,
    and the rest of its overview."""
    got, shown, job_id = job_overview(job, history, place_of)
    if got.monitor is None:
        raise HpctrainError(
            f"no monitor samples for {'job ' + job_id if job_id else shown} in "
            f"{shown}/{rundir.MONITOR_DIR}",
            "the job has not started yet, or ran with --no-monitor; the monitor is on by default",
        )
    return {"job_id": job_id, **got.monitor, "run_dir": shown}, shown, got


def study_counts(points: Sequence[JobRecord]) -> dict[str, int]:
    """A sweep's points by how they stand: done, running, pending, cancelled, failed (the
    other ends)."""
    counts = {"done": 0, "running": 0, "pending": 0, "cancelled": 0, "failed": 0}
    for r in latest_segments(points):
        counts[_standing_word(r)] += 1
    return counts


def _standing_word(r: JobRecord) -> str:
    from hpctrain.slurm.states import JobState, parse_state

    state = parse_state(r.state)
    if state is JobState.COMPLETED:
        return "done"
    if state is JobState.CANCELLED:
        return "cancelled"
    if r.terminal or state.is_terminal:
        return "failed"
    return "pending" if state is JobState.PENDING else "running"


def latest_segments(points: Sequence[JobRecord]) -> list[JobRecord]:
    """Each point once: a chained point by the segment that stands for it (running, else the
    first unfinished, else the last)."""
    by_point: dict[str, list[JobRecord]] = {}
    for r in points:
        by_point.setdefault(r.run_dir or r.job_id, []).append(r)
    return [_standing(group) for group in by_point.values()]


def _standing(group: list[JobRecord]) -> JobRecord:
    unfinished = [r for r in group if not r.terminal]
    return (unfinished or group[-1:])[0]


def one_row_per_study(records: Sequence[JobRecord], labels: dict[int, tuple[str, str]]
                      ) -> list[JobRecord]:
    """A study's jobs as one row: `sweep NAME [37/60 done, 4 running, 1 failed]`, its job ids
    the arrays' (a scaling study's: its runs'), its state the most urgent one (running, else
    pending, else the end), its run directory the study's."""
    groups: dict[int, list[JobRecord]] = {}
    out: list[JobRecord] = []
    for r in records:
        if r.study is None:
            out.append(r)
        elif r.study not in groups:
            groups[r.study] = [r]
            out.append(r)
        else:
            groups[r.study].append(r)
    for study, points in groups.items():
        label, directory = labels.get(study, (f"study {study}", ""))
        out[out.index(points[0])] = study_row(points, label, directory or None)
    return out


def study_row(points: Sequence[JobRecord], label: str, directory: str | None) -> JobRecord:
    """The one row standing for a study's jobs."""
    import dataclasses

    from hpctrain.slurm.parsers import array_of

    counts = study_counts(points)
    total = sum(counts.values())
    parts = [f"{counts['done']}/{total} done"] + [f"{v} {k}" for k, v in counts.items()
                                                   if v and k != "done"]
    standing = latest_segments(points)
    state = ("RUNNING" if counts["running"] else "PENDING" if counts["pending"]
             else "FAILED" if counts["failed"] else "CANCELLED" if counts["cancelled"]
             else "COMPLETED")
    arrays = ",".join(dict.fromkeys(array_of(r.job_id) for r in points if r.segment in (None, 1)))
    return dataclasses.replace(
        points[0], job_id=arrays, run_dir=directory, state=state,
        job_name=f"{label} [{', '.join(parts)}]",
        terminal=all(r.terminal for r in standing), node_list=None, reason=None,
        elapsed_s=max((r.elapsed_s or 0 for r in standing), default=0), chain_head=None,
        verdict=f"{counts['failed']} failed" if counts["failed"] else "",
        exit_code=1 if counts["failed"] else 0, signal=None)

