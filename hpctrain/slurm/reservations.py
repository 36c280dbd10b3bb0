"""SLURM's reservations, as `scontrol show reservation` prints them, read as values.

Pure: text in, reservations out. The text form is the one both supported SLURMs print
(22.05's scontrol has no --json); a reservation's name may hold spaces, so each value runs to
the next `Key=`. Times are the controller's local time, without a zone: they are read in this
machine's zone, which a login node shares with its controller on every site we know.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from hpctrain.slurm.hostlist import expand_nodes

# A time that must end before a window ends this long before it: the job must still be
# scheduled (plan/maintenance.py's fix, why's advice for a job already waiting).
MARGIN_S = 5 * 60
# Shorter than this, a segment before a window is not worth its start-up: wait instead.
MIN_SEGMENT_S = 10 * 60
SHOW_ARGV = ("scontrol", "show", "reservation")
_KEY = re.compile(r"(?:^|(?<=\s))([A-Z][A-Za-z]*)=")
_NONE = "No reservations in the system"


@dataclass(frozen=True)
class Reservation:
    """One reservation as `scontrol show reservation` shows it."""

    name: str
    start: float  # epoch seconds
    end: float
    nodes: tuple[str, ...]
    flags: frozenset[str]

    @property
    def maintenance(self) -> bool:
        return "MAINT" in self.flags

    def overlaps(self, start: float, end: float) -> bool:
        return self.start < end and self.end > start


def minute(t: float) -> str:
    """`2026-11-27 20:25`, in this machine's zone."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def fit_before(window: Reservation, now: float) -> int:
    """The longest time limit, in whole minutes, that ends MARGIN_S before `window`."""
    return max(int((window.start - now - MARGIN_S) // 60 * 60), 0)


def segments_before(window: Reservation, now: float, total_s: int) -> tuple[int, int] | None:
    """(time of a segment, segments) that run `total_s` as a chain whose first segment ends
    before `window`; None where that segment would be shorter than MIN_SEGMENT_S."""
    fit = fit_before(window, now)
    return (fit, math.ceil(total_s / fit)) if fit >= MIN_SEGMENT_S else None


def _fields(block: str) -> dict[str, str]:
    """`Key=value` pairs of one reservation; a value runs to the next key."""
    text = " ".join(block.split())
    keys = list(_KEY.finditer(text))
    return {m.group(1): text[m.end():(keys[i + 1].start() if i + 1 < len(keys) else None)]
            .strip() for i, m in enumerate(keys)}


def _epoch(text: str) -> float | None:
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def parse(text: str) -> list[Reservation]:
    """Every reservation in `scontrol show reservation`'s output (none: an empty list)."""
    if text.strip().startswith(_NONE):
        return []
    found = []
    for block in re.split(r"\n\s*\n|(?=^ReservationName=)", text, flags=re.MULTILINE):
        f = _fields(block)
        start, end = _epoch(f.get("StartTime", "")), _epoch(f.get("EndTime", ""))
        if "ReservationName" not in f or start is None or end is None:
            continue
        nodes = "" if f.get("Nodes") in (None, "(null)") else f["Nodes"]
        found.append(Reservation(f["ReservationName"], start, end, tuple(expand_nodes(nodes)),
                                 frozenset(x for x in f.get("Flags", "").split(",") if x)))
    return found


def maintenance(found: Sequence[Reservation]) -> list[Reservation]:
    return [r for r in found if r.maintenance]
