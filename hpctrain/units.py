"""SLURM time and memory strings, parsed and formatted (pure)."""

from __future__ import annotations

import re

_MEM = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)B?\s*$", re.IGNORECASE)
_MB_PER = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}


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
    if not part.isdigit():
        raise ValueError(f"invalid time {text!r}: use minutes, HH:MM:SS or D-HH:MM:SS")
    return int(part)


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
            f"invalid memory {text!r}: use MB or a K/M/G/T suffix, e.g. 125000 or 120G"
        )
    return int(float(m.group(1)) * _MB_PER[m.group(2).upper()])
