"""`submit --first-of 1x4,4x1`: one run raced as alternative topologies; the first to start wins.

Plan, then act: `prepare_race` decides every alternative as a value (one shared run directory,
one script each); `submit_race` queues them all held, writes their ids into the run directory,
records them, then releases them. The winner claims the run and cancels its siblings in its own
script (templates/sbatch.sh.j2), so nothing has to watch from the login node.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from hpctrain.errors import HpctrainError, PlanError
from hpctrain.plan import JobPlan, JobRequest
from hpctrain.submission.planned import RunDirPlan, Script, image_paths
from hpctrain.submission.prepare import Prepared, listed, prepare, segment_options
from hpctrain.values import units
from hpctrain.values.rundir import RunDir, RunFile
from hpctrain.values.units import Topology

if TYPE_CHECKING:
    from datetime import datetime

    from hpctrain.history import History, JobRecord
    from hpctrain.places import Place
    from hpctrain.slurm.client import SlurmClient
    from hpctrain.slurm.testonly import TestOnlyVerdict
    from hpctrain.snapshots.spec import CodeSpec

T = TypeVar("T")
MAX_ALTERNATIVES = 8


@dataclass(frozen=True)
class Alternative:
    """One way to run the raced job: a topology, in a partition of its own or the job's, on
    the cluster of a profile of its own or the job's (submission/crossrace.py)."""

    shape: Topology
    partition: str | None = None
    profile: str | None = None

    @property
    def label(self) -> str:
        """`2x4`, `gpudev:1x4` with a partition, `gpudev:1x4@raven` with a profile."""
        where = f"{self.partition}:{self.shape.label}" if self.partition else self.shape.label
        return f"{where}@{self.profile}" if self.profile else where


_PARTITION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def _alternative(part: str) -> Alternative:
    part, at, profile = part.partition("@")
    if at and not _PARTITION.fullmatch(profile):
        raise ValueError(f"{profile!r} is not a profile name")
    partition, _, shape = part.rpartition(":")
    if partition and not _PARTITION.fullmatch(partition):
        raise ValueError(f"{partition!r} is not a partition name")
    return Alternative(units.parse_topology(shape), partition or None, profile or None)


def parse_first_of(text: str) -> tuple[Alternative, ...]:
    """`1x4,4x1,2x2`, `gpu:2x4,gpudev:1x4` or `2x4@raven,1x4@gilbreth` as alternatives; every
    malformed or repeated one is an error naming it."""
    try:
        found: list[Alternative] = []
        for part in text.split(","):
            alt = _alternative(part.strip())
            if alt in found:
                raise ValueError(f"{alt.label} is listed twice")
            found.append(alt)
    except ValueError as e:
        raise HpctrainError(f"--first-of {text!r}: {e}",
                            "give two or more topologies, each NODESxGPUS, PARTITION:NODESxGPUS, "
                            "either with @PROFILE, e.g. --first-of 1x4,4x1, "
                            "--first-of gpu:2x4,gpudev:1x4 or --first-of 2x4@raven,1x4@gilbreth"
                            ) from None
    if not 2 <= len(found) <= MAX_ALTERNATIVES:
        raise HpctrainError(
            f"--first-of {text!r}: give 2 to {MAX_ALTERNATIVES} topologies",
            "e.g. --first-of 1x4,4x1 (one of them alone is plain --nodes/--gpus-per-node)",
        )
    return tuple(found)


def legs(alternatives: Sequence[Alternative], profile: str
         ) -> dict[str, tuple[Alternative, ...]]:
    """The alternatives by the profile each names (`profile`: the one given with -P), in the
    order first named."""
    found: dict[str, list[Alternative]] = {}
    for a in alternatives:
        found.setdefault(a.profile or profile, []).append(a)
    return {name: tuple(group) for name, group in found.items()}


def is_across(alternatives: Sequence[Alternative], profile: str) -> bool:
    return len(legs(alternatives, profile)) > 1


def race_requests(req: JobRequest, alternatives: Sequence[Alternative]
                  ) -> tuple[JobRequest, ...]:
    """One request per alternative: the same job on each topology (and partition), marked as
    racing."""
    if req.chain > 1:
        raise HpctrainError("--first-of and --chain do not mix",
                            "race one job, or chain one topology")
    return tuple(dataclasses.replace(req, nodes=a.shape.nodes,
                                     gpus_per_node=a.shape.gpus_per_node,
                                     partition=a.partition or req.partition, race=a.label)
                 for a in alternatives)


def script_name(label: str) -> str:
    """`job-2x4.sbatch`, `job-gpudev-1x4.sbatch`, `job-1x4-raven.sbatch`."""
    return f"job-{label.replace(':', '-').replace('@', '-')}.sbatch"


@dataclass(frozen=True)
class Race:
    """Every alternative decided, sharing one run directory (this is the dry run)."""

    alternatives: tuple[Prepared, ...]

    @property
    def run_dir(self) -> Path:
        return self.alternatives[0].run_dir

    @property
    def labels(self) -> str:
        return ",".join(p.plan.race or "" for p in self.alternatives)

    def files(self) -> tuple[RunFile, ...]:
        """Every alternative's files once (they share the profile and config snapshot)."""
        seen: dict[Path, RunFile] = {}
        for prep in self.alternatives:
            seen.update((f.path, f) for f in prep.files if f.path not in seen)
        return tuple(seen.values())

    def alternative_dicts(self) -> list[dict[str, object]]:
        return [{"topology": p.plan.race, **p.as_dict()} for p in self.alternatives]

    def scripts(self) -> tuple[Script, ...]:
        return tuple(s for p in self.alternatives for s in p.scripts())

    def run_dirs(self) -> tuple[RunDirPlan, ...]:
        return (RunDirPlan(self.run_dir, self.files()),)

    def frozen_code(self) -> CodeSpec | None:
        # The run directory (and its code) is the first alternative's, for all of them.
        return self.alternatives[0].code

    def needed_paths(self) -> tuple[str, ...]:
        return image_paths(self.scripts())

    def with_listing(self, checked: CodeSpec) -> Race:
        return Race(tuple(dataclasses.replace(p, code=listed(p.code, checked))
                          for p in self.alternatives))

    def as_dict(self) -> dict[str, object]:
        return {"run_dir": str(self.run_dir), "first_of": self.labels,
                "alternatives": self.alternative_dicts()}


def prepare_race(
    req: JobRequest, shapes: Sequence[Alternative], workdir: Path, *,
    environ: Mapping[str, str] | None = None, now: datetime | None = None,
) -> Race:
    """Plan every alternative; refuse the race listing each impossible one's problems."""
    from datetime import datetime, timezone

    stamp, token = now or datetime.now(timezone.utc), os.urandom(3).hex()
    return Race(each_alternative(race_requests(req, shapes), lambda one: prepare(
        one, workdir, environ=environ, now=stamp, token=token,
        script_name=script_name(one.race or ""))))


def plan_race(req: JobRequest, shapes: Sequence[Alternative], *,
              environ: Mapping[str, str] | None = None) -> tuple[tuple[JobPlan, str], ...]:
    """Every alternative's plan and script, for `render` (no run directory)."""
    from hpctrain.render.script import plan_script

    return each_alternative(race_requests(req, shapes),
                            lambda one: plan_script(one, environ=environ))


def each_alternative(requests: Sequence[JobRequest], build: Callable[[JobRequest], T]
                     ) -> tuple[T, ...]:
    """`build` for each alternative; one PlanError with every impossible one's problems."""
    done: list[T] = []
    problems: list[str] = []
    for one in requests:
        try:
            done.append(build(one))
        except PlanError as e:
            problems += [f"{one.race}: {p}" for p in e.problems]
    if problems:
        raise PlanError([*problems, "(--first-of: every alternative must be possible; "
                         "drop or change the ones above)"])
    return tuple(done)


def ask_test_only(client: SlurmClient, scripts: Sequence[str]) -> list[TestOnlyVerdict]:
    """SLURM's verdict and start estimate for each script (`sbatch --test-only`)."""
    return [client.test_only(s) for s in scripts]


def estimates(race: Race, client: SlurmClient) -> list[TestOnlyVerdict]:
    """SLURM's verdict and start estimate for each alternative (`sbatch --test-only`)."""
    return ask_test_only(client, [p.script for p in race.alternatives])


@dataclass(frozen=True)
class RaceSubmitted:
    """The queued alternatives: (topology, job id, history row) each, and their run directory."""

    run_dir: Path
    cluster: str
    jobs: tuple[tuple[str, str, JobRecord], ...]

    def as_dict(self) -> dict[str, object]:
        head = self.jobs[0][1]
        return {"job_id": head, "cluster": self.cluster, "run_dir": str(self.run_dir),
                "first_of": ",".join(t for t, _, _ in self.jobs),
                "alternatives": [{"topology": t, "job_id": j, "stdout": r.stdout_path,
                                  "script": r.script_path} for t, j, r in self.jobs],
                "follow": [f"hpctrain status {head}", f"hpctrain logs {head}"]}


def _undo(race: Race, ids: Sequence[str], place: Place) -> None:
    """Cancel the alternatives queued so far and remove the run directory (nothing ran yet)."""
    with contextlib.suppress(HpctrainError):
        place.slurm_client().scancel(ids)
    with contextlib.suppress(HpctrainError):
        place.discard(race.run_dir)


def _queue_held(race: Race, place: Place) -> list[str]:
    """sbatch --hold every alternative; on a refusal cancel those queued and undo the directory."""
    ids: list[str] = []
    for prep in race.alternatives:
        try:
            ids.append(place.slurm_client().submit(
                prep.script_path, cwd=prep.workdir,
                options=("--hold", *segment_options(prep.plan, None))))
        except HpctrainError as e:
            _undo(race, ids, place)
            raise HpctrainError(
                f"alternative {prep.plan.race}: {e.what}"
                + (f" (cancelled the ones queued: {', '.join(ids)})" if ids else ""),
                e.fix) from None
    return ids


def _write_ids(race: Race, ids: Sequence[str], cluster: str, place: Place) -> None:
    lines = "".join(f"{j} {p.plan.race}\n" for j, p in zip(ids, race.alternatives, strict=True))
    # Written before any alternative is released: none starts without knowing its siblings.
    place.write(RunDir(race.run_dir).alternatives, lines)
    info = {"first_of": race.labels, "cluster": cluster, "job_ids": list(ids),
            "alternatives": [{"topology": p.plan.race, "job_id": j, "plan": p.plan.summary()}
                             for j, p in zip(ids, race.alternatives, strict=True)]}
    with contextlib.suppress(OSError, HpctrainError):
        place.write(RunDir(race.run_dir).run_info, json.dumps(info, indent=2) + "\n")


def submit_race(race: Race, place: Place, history: History) -> RaceSubmitted:
    """Create the run directory, queue every alternative held, record them, then release them.

    Held until their ids are on disk: an alternative that started before would not know
    which siblings to cancel.
    """
    from hpctrain.submission.submit import create_run_dir, queued, record_job

    # One directory for all: the first alternative's, holding every alternative's files.
    origin = create_run_dir(dataclasses.replace(race.alternatives[0], files=race.files()), place)
    ids = _queue_held(race, place)
    cluster = place.slurm_client().cluster_name() or race.alternatives[0].plan.cluster
    try:
        _write_ids(race, ids, cluster, place)
    except (OSError, HpctrainError) as e:
        _undo(race, ids, place)
        raise HpctrainError(
            f"cannot write the race's job ids into {race.run_dir}: {getattr(e, 'what', e)} "
            f"(cancelled the held alternatives {', '.join(ids)})",
            "check that the run directory is writable") from None
    jobs = []
    for job_id, prep in zip(ids, race.alternatives, strict=True):
        row = record_job(prep, queued(prep, place, job_id, origin), history, place,
                         head=ids[0], race_of=race.labels)
        jobs.append((prep.plan.race or "", job_id, row))
    try:
        place.slurm_client().release(ids)
    except HpctrainError as e:
        raise HpctrainError(
            f"alternatives {', '.join(ids)} are queued but held: {e.what}",
            f"release them with `scontrol release {','.join(ids)}`, or "
            f"`hpctrain cancel {ids[0]}`") from None
    return RaceSubmitted(race.run_dir, cluster, tuple(jobs))
