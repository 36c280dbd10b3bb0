"""`--first-of 2x4@raven,1x4@gilbreth`: a race across profiles, that is across clusters.

Within one cluster the winner cancels its siblings from its own batch script
(submission/race.py). A job on one cluster cannot reach another's SLURM, so a race across
profiles is one race per profile (each with that in-script cancel among its own alternatives),
plus a watcher on this machine: a detached process that refreshes every alternative through
its place (here, or the profile's login over its one connection) and, once one has started,
cancels the others. `hpctrain status` shows each; the watcher's log says what it did.

Plan, then act: `legs` splits the alternatives by profile (a value); the CLI runs each leg
through the one pipeline at its place; `Watch` is what the watcher is told (a JSON file);
`decide` is the pure rule; `watch` the loop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hpctrain.errors import HpctrainError
from hpctrain.files import paths
from hpctrain.submission.race import Alternative

if TYPE_CHECKING:
    from hpctrain.history import JobRecord

# How often the watcher asks; a cancelled loser may have started within this long.
POLL_S = 10.0
# A race nobody won in this long is left alone (its jobs stay queued; the log says so).
MAX_WAIT_S = 14 * 24 * 3600
POLL_VAR = "HPCTRAIN_RACE_POLL_S"
# States a job reaches only once it started: the first of them wins.
_NOT_STARTED = {"PENDING", "CANCELLED", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "UNKNOWN"}


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
