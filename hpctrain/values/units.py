"""The notations hpctrain reads: SLURM times and memory sizes, NODESxGPUS topologies (pure).

One parser per notation, with one set of bounds, shared by every command.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MEM = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*$", re.IGNORECASE)
# MB per unit as a fraction (numerator, denominator).
_MB_PER = {"K": (1, 1024), "": (1, 1), "M": (1, 1), "G": (1024, 1), "T": (1024 * 1024, 1)}
# SLURM keeps sizes in MB in 64 bits; anything longer than this is a typo, not a size.
_MAX_MB = 1 << 40
# Ten digits of days or minutes is already centuries; longer numbers are typos too.
_MAX_TIME_DIGITS = 10


# SLURM's time forms in words, for --help and the errors that mention --time.
TIME_FORMS = ("SLURM's forms: MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS or "
              "DAYS-HOURS[:MINUTES[:SECONDS]]; `2` is 2 minutes, `1:30` 1 minute 30 seconds, "
              "`2:00:00` two hours, `1-00:00:00` a day")


def parse_time_seconds(text: str) -> int:
    """Parse a SLURM time ("30", "1:00:00", "2-00:00:00", "1-12") into seconds."""
    s = text.strip()
    days = 0
    if "-" in s:
        d, _, s = s.partition("-")
        days = _int(d, text)
        # With days, SLURM reads "d-h", "d-h:m" and "d-h:m:s".
        nums = [_int(p, text) for p in s.split(":")]
        if len(nums) > 3:
            raise ValueError(f"invalid time {text!r}")
        h, m, sec = (nums + [0, 0])[:3]
    else:
        # Without days, SLURM reads "m", "m:s" and "h:m:s".
        nums = [_int(p, text) for p in s.split(":")]
        if len(nums) > 3:
            raise ValueError(f"invalid time {text!r}")
        if len(nums) == 1:
            h, m, sec = 0, nums[0], 0
        elif len(nums) == 2:
            h, m, sec = 0, nums[0], nums[1]
        else:
            h, m, sec = nums
    if sec >= 60 or (m >= 60 and (days or len(nums) == 3)):
        raise ValueError(f"invalid time {text!r}: minutes and seconds must be under 60")
    return ((days * 24 + h) * 60 + m) * 60 + sec


def _int(part: str, text: str) -> int:
    # isascii: isdigit alone accepts digits such as "²" that int() refuses.
    if not (part.isascii() and part.isdigit()):
        raise ValueError(f"invalid time {_shown(text)}: use minutes, HH:MM:SS or D-HH:MM:SS")
    if len(part.lstrip("0")) > _MAX_TIME_DIGITS:
        raise ValueError(f"invalid time {_shown(text)}: the number is far too large")
    return int(part)


def _shown(text: str) -> str:
    """The user's text for a message, shortened when it is very long."""
    return repr(text) if len(text) <= 40 else repr(text[:20]) + f"... ({len(text)} characters)"


def format_time(seconds: int, compact: bool = False) -> str:
    """Format seconds as SLURM prints limits, [D-]HH:MM:SS; `compact` as squeue prints
    elapsed times, without leading zero hours (5:02, 1:02:03)."""
    days, rest = divmod(seconds, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    if compact and not days:
        return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"
    hms = f"{h:02d}:{m:02d}:{s:02d}"
    return f"{days}-{hms}" if days else hms


def parse_mem_mb(text: str) -> int:
    """Parse a SLURM memory size ("500000", "500G", "125000M") into MB; plain numbers are MB."""
    m = _MEM.match(text)
    if not m:
        raise ValueError(
            f"invalid memory {_shown(text)}: use MB or a K/M/G/T suffix, e.g. 125000 or 120G"
        )
    # Exact arithmetic: float() turns a long number into infinity, then int() fails.
    # (fractions is imported here: it costs a login node's `render` 3 ms otherwise.)
    from fractions import Fraction

    num, den = _MB_PER[m.group(2).upper()]
    mb = Fraction(m.group(1)) * Fraction(num, den) if len(text) < 40 else _MAX_MB + 1
    if mb > _MAX_MB:
        raise ValueError(f"memory {_shown(text)} is larger than any node has")
    if 0 < mb < 1:
        raise ValueError(f"memory {_shown(text)} is less than 1 MB; SLURM counts whole MB")
    return int(mb)


# ASCII digits only (str.isdigit() also takes full-width and other scripts' digits); bounds
# far above any cluster (SLURM's MaxNodeCount is 64k, no node has 1000 GPUs) catch typos.
_TOPOLOGY = re.compile(r"\s*([0-9]{1,5})\s*[xX]\s*([0-9]{1,3})\s*")
MAX_NODES = 9999
MAX_GPUS_PER_NODE = 64


@dataclass(frozen=True)
class Topology:
    """Nodes and GPUs per node."""

    nodes: int
    gpus_per_node: int

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def label(self) -> str:
        return f"{self.nodes}x{self.gpus_per_node}"


def parse_topology(text: str) -> Topology:
    """`2x4` (NODESxGPUS per node) as a Topology: 1 to 9999 nodes, 1 to 64 GPUs per node."""
    m = _TOPOLOGY.fullmatch(text)
    if m is None:
        raise ValueError(f"{_shown(text)} is not NODESxGPUS (e.g. 2x4: 2 nodes, 4 GPUs each)")
    topo = Topology(int(m[1]), int(m[2]))
    if not 1 <= topo.nodes <= MAX_NODES or not 1 <= topo.gpus_per_node <= MAX_GPUS_PER_NODE:
        raise ValueError(f"{topo.label} is out of range: 1 to {MAX_NODES} nodes, "
                         f"1 to {MAX_GPUS_PER_NODE} GPUs per node")
    return topo


def parse_topologies(text: str) -> tuple[Topology, ...]:
    """`1x4,4x1,2x2` in the order given; a malformed or repeated one is a ValueError."""
    out: list[Topology] = []
    for part in text.split(","):
        topo = parse_topology(part)
        if topo in out:
            raise ValueError(f"{topo.label} is listed twice")
        out.append(topo)
    return tuple(out)
