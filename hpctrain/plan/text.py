"""Which characters may reach an #SBATCH line or a SLURM name."""

from __future__ import annotations

import re

IDENT = re.compile(r"^[A-Za-z0-9_.+-]+$")
CONSTRAINT = re.compile(r"^[A-Za-z0-9_.,&|\[\]*:-]+$")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def unsafe_name(value: str, pattern: re.Pattern[str], what: str) -> tuple[str, ...]:
    """The problem with a SLURM name that does not match `pattern`, or none."""
    if pattern.match(value):
        return ()
    return (
        f"{what} {value!r} has characters SLURM names never contain; "
        "use letters, digits and . _ - only",
    )


def number(n: int) -> str:
    """A user's count for a message; a number hundreds of digits long is shortened."""
    # Python refuses str() of ints over 4300 digits; 14000 bits is about 4200 digits.
    if n.bit_length() > 14000:
        return "a number thousands of digits long"
    text = str(n)
    return text if len(text) <= 15 else f"{text[:6]}...({len(text)} digits)"
