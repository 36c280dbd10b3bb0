"""`--first-of 2x4@raven,1x4@gilbreth`: a race across profiles, that is across clusters.

Within one cluster the winner cancels its siblings from its own batch script
(submission/race.py). A job on one cluster cannot reach another's SLURM, so a race across
profiles is one race per profile (each with that in-script cancel among its own alternatives),
plus a watcher on this machine: a detached process that refreshes every alternative through
its place (here, or the profile's login over its one connection) and, once one has started,
cancels the others. `hpctrain status` shows each; the watcher's log says what it did.

Plan, then act: `race.legs` splits the alternatives by profile (a value); `across` makes the kind,
each leg a RaceKind at its profile's place; `CrossRaceKind` plans every leg through the one
pipeline at its place before it queues any, then queues them (cancelling those queued if one
cannot be) and starts the watcher. `Watch` is what the watcher is told (a JSON file); `decide`
is the pure rule; `watch` the loop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from hpctrain.errors import HpctrainError
from hpctrain.files import paths
from hpctrain.submission.race import legs, parse_first_of

if TYPE_CHECKING:
    from hpctrain.history import History, JobRecord
    from hpctrain.places import Place
    from hpctrain.plan import JobRequest
    from hpctrain.submission.kinds import RaceKind
    from hpctrain.submission.pipeline import Outcome
    from hpctrain.submission.planned import RunDirPlan, Script
    from hpctrain.submission.race import Race, RaceSubmitted

# How often the watcher asks; a cancelled loser may have started within this long.
POLL_S = 10.0
# A race nobody won in this long is left alone (its jobs stay queued; the log says so).
MAX_WAIT_S = 14 * 24 * 3600
POLL_VAR = "HPCTRAIN_RACE_POLL_S"
# States a job reaches only once it started: the first of them wins.
_NOT_STARTED = {"PENDING", "CANCELLED", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "UNKNOWN"}


@dataclass(frozen=True)
class Leg:
    """One profile's race at its place."""

    profile: str
    place: Place
    kind: RaceKind


@dataclass(frozen=True)
class LegOutcome(Leg):
    """A leg planned at its place; `outcome.result` once queued."""

    outcome: Outcome[Race, RaceSubmitted]

    def queued(self) -> RaceSubmitted:
        assert self.outcome.result is not None  # called on legs the pipeline acted on
        return self.outcome.result


@dataclass(frozen=True)
class CrossRace:
    """Every profile's race planned at its place (the dry run): each leg's scripts, run
    directory and project were checked there, so the pipeline has nothing left to check."""

    first_of: str
    legs: tuple[LegOutcome, ...]

    def scripts(self) -> tuple[Script, ...]:
        return tuple(s for leg in self.legs for s in leg.outcome.prepared.scripts())

    def run_dirs(self) -> tuple[RunDirPlan, ...]:
        # Each leg's are at its own place, checked there as it was planned: not at this one.
        return ()

    def frozen_code(self) -> None:
        return None

    def needed_paths(self) -> tuple[str, ...]:
        # Each leg's images are at its own place, checked there as the leg is queued.
        return ()

    def with_listing(self, checked: object) -> CrossRace:
        return self

    def as_dict(self) -> dict[str, object]:
        return {"first_of": self.first_of,
                "profiles": [{"profile": leg.profile, **leg.outcome.prepared.as_dict()}
                             for leg in self.legs]}


@dataclass(frozen=True)
class RaceWatcher:
    """The detached process that cancels the other profiles' jobs once one started."""

    pid: int
    orders: Path

    @property
    def log(self) -> Path:
        return self.orders.with_suffix(".log")

    def as_dict(self) -> dict[str, object]:
        return {"pid": self.pid, "orders": str(self.orders), "log": str(self.log)}


@dataclass(frozen=True)
class CrossRaceSubmitted:
    """Every profile's race queued, and the watcher over them."""

    first_of: str
    legs: tuple[LegOutcome, ...]
    watcher: RaceWatcher


@dataclass(frozen=True)
class CrossRaceKind:
    """`--first-of` naming other profiles: one RaceKind per profile, each at its own place;
    the place given to `prepare` and `execute` is this machine, where the watcher runs."""

    first_of: str
    legs: tuple[Leg, ...]

    @property
    def runs_folder(self) -> None:
        # Each leg brings the project to its own place as it is queued.
        return None

    def prepare(self, place: Place) -> CrossRace:
        """Every leg planned at its place before any is queued."""
        from hpctrain.submission.pipeline import Outcome, plan

        return CrossRace(self.first_of, tuple(
            LegOutcome(leg.profile, leg.place, leg.kind, Outcome(plan(leg.kind, leg.place)))
            for leg in self.legs))

    def execute(self, prepared: CrossRace, place: Place, history: History
                ) -> CrossRaceSubmitted:
        """Each leg queued as planned (if one cannot be, those queued already are cancelled),
        then the watcher started."""
        from hpctrain.submission.pipeline import act
        from hpctrain.tracking import byplace

        done: list[LegOutcome] = []
        try:
            for leg in prepared.legs:
                done.append(replace(leg, outcome=act(leg.kind, leg.outcome.prepared, leg.place,
                                                     history)))
        except HpctrainError as e:
            rows = [row for leg in done for _, _, row in leg.queued().jobs]
            if rows:
                byplace.cancel(history, place, rows)
            raise HpctrainError(f"{e.what} (cancelled the other profiles' alternatives: "
                                f"{', '.join(r.job_id for r in rows) or 'none queued'})",
                                e.fix) from None
        return CrossRaceSubmitted(self.first_of, tuple(done), _start(self.first_of, done))


def _start(first_of: str, done: Sequence[LegOutcome]) -> RaceWatcher:
    """The watcher over every leg's recorded alternatives."""
    results = [(leg.profile, leg.queued()) for leg in done]
    orders = Watch(first_of, tuple((name, tuple(row.id for _, _, row in got.jobs))
                                   for name, got in results))
    head = results[0][1]
    file = watch_file(head.jobs[0][1], head.cluster)
    return RaceWatcher(start_watcher(orders, file), file)


def across(first_of: str, main: JobRequest, request_for: Callable[[str], JobRequest],
           local: Place, login: str | None, python_choice: str | None, history: History
           ) -> CrossRaceKind | None:
    """The race of `main` (the -P profile's job) as `first_of` names it across profiles, each
    other profile's job from `request_for`; None where every alternative is `main`'s own (a
    race on one cluster)."""
    from hpctrain import places
    from hpctrain.submission.kinds import RaceKind
    from hpctrain.submission.questions import before_submit

    grouped = legs(parse_first_of(first_of), main.profile.name)
    if len(grouped) == 1:
        return None
    found = []
    for name, group in grouped.items():
        own = name == main.profile.name
        request = main if own else request_for(name)
        # --login names the -P profile's way in; another profile goes through its own.
        place = places.place_for(request.profile, local, login if own else None, python_choice)
        found.append(Leg(request.profile.name, place,
                         RaceKind(before_submit(request, place, history), group)))
    return CrossRaceKind(first_of, tuple(found))


@dataclass(frozen=True)
class Watch:
    """What the watcher is told: the race's history rows, grouped by profile."""

    first_of: str
    legs: tuple[tuple[str, tuple[int, ...]], ...]  # (profile, history row ids)
    poll_s: float = POLL_S
    max_wait_s: float = MAX_WAIT_S

    def to_json(self) -> str:
        return json.dumps({"first_of": self.first_of, "poll_s": self.poll_s,
                           "max_wait_s": self.max_wait_s,
                           "legs": [{"profile": p, "rows": list(r)} for p, r in self.legs]},
                          indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Watch:
        data = json.loads(text)
        return cls(str(data["first_of"]),
                   tuple((str(leg["profile"]), tuple(int(r) for r in leg["rows"]))
                         for leg in data["legs"]),
                   float(data["poll_s"]), float(data["max_wait_s"]))


@dataclass(frozen=True)
class Decision:
    """A race across profiles: its winner, the rows to cancel, whether it is over."""

    winner: str | None  # the profile whose alternative started first
    losers: tuple[int, ...]  # rows to cancel: every other profile's unfinished ones
    over: bool  # nothing left to watch: a winner, or every alternative ended


def started(record: JobRecord) -> bool:
    return record.state not in _NOT_STARTED


def decide(watch: Watch, rows: Mapping[int, JobRecord]) -> Decision:
    """Who won, whom to cancel: the first profile (in the race's order) with a started job."""
    by_leg = {p: [rows[r] for r in ids if r in rows] for p, ids in watch.legs}
    winner = next((p for p, got in by_leg.items() if any(started(r) for r in got)), None)
    if winner is None:
        ended = all(r.terminal for got in by_leg.values() for r in got)
        return Decision(None, (), ended)
    losers = tuple(r.id for p, got in by_leg.items() if p != winner for r in got
                   if not r.terminal)
    return Decision(winner, losers, True)


def watch_file(head: str, cluster: str) -> Path:
    """Where the watcher of the race led by job `head` on `cluster` keeps its orders and log."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in f"{cluster}-{head}")
    return paths.state_dir() / "races" / f"{safe}.json"


def start_watcher(watch: Watch, file: Path) -> int:
    """Write the orders and start the detached watcher; its pid. It outlives this command
    (its own session) and logs next to its orders (`.log`)."""
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(watch.to_json())
    with open(file.with_suffix(".log"), "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hpctrain.submission.crossrace", str(file)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            env=os.environ.copy())
    return proc.pid


def _say(text: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text}", flush=True)


def watch(file: Path) -> int:
    """Refresh the race until one profile's alternative starts, then cancel the others."""
    from hpctrain.history import History
    from hpctrain.places import LocalPlace
    from hpctrain.slurm.client import SlurmClient
    from hpctrain.tracking import byplace

    orders = Watch.from_json(file.read_text())
    poll = float(os.environ.get(POLL_VAR) or orders.poll_s)
    local = LocalPlace(SlurmClient.from_environment)
    ids = [r for _, rows in orders.legs for r in rows]
    _say(f"watching the race {orders.first_of} (history rows {ids}), every {poll:g} s")
    deadline = time.time() + orders.max_wait_s
    history = History()
    while time.time() < deadline:
        try:
            fresh = byplace.refresh(history, local, history.by_row_ids(ids), None)
        except HpctrainError as e:
            # A controller or a login down for a while: ask again, as status would.
            _say(f"cannot refresh ({e.what}); trying again in {poll:g} s")
            time.sleep(poll)
            continue
        found = decide(orders, {r.id: r for r in fresh.records})
        if found.winner is not None:
            losers = history.by_row_ids(found.losers)
            report = byplace.cancel(history, local, losers)
            _say(f"{found.winner} started first; cancelled {len(report.cancelled)} job(s) "
                 f"elsewhere: {', '.join(r.job_id for r in losers) or 'none left'}")
            return 0
        if found.over:
            _say("every alternative ended before one started; nothing to cancel")
            return 0
        time.sleep(poll)
    _say(f"no alternative started in {orders.max_wait_s:g} s; leaving them queued")
    return 0


if __name__ == "__main__":
    sys.exit(watch(Path(sys.argv[1])))
