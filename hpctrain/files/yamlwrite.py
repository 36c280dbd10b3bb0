"""Plain data (dicts, lists, strings, numbers, booleans, None) as block-style YAML text.

Each submit writes the resolved profile into the run directory as YAML for a person to read;
PyYAML took 14 ms to import and 4 ms to write it, a tenth of a submit. This writes the same
data without it. A string is written bare only where no YAML 1.1 reader could take it for
anything else (a letter first, no spaces, not a boolean or null word), else double-quoted
with YAML's escapes; tests/unit/test_yamlwrite.py reads every shipped profile and hostile
strings back through PyYAML.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

_BARE = re.compile(r"[A-Za-z_/][A-Za-z0-9_./+-]*\Z")
# PyYAML's booleans and nulls (YAML 1.1), and the y/n that other readers take for booleans.
_WORDS = {"yes", "no", "true", "false", "on", "off", "null", "y", "n"}
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def dump(data: Mapping[str, Any]) -> str:
    """`data` as a YAML document (a mapping at the top, keys in their order)."""
    return "".join(line + "\n" for line in _block(data, 0))


def _block(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"a mapping key must be a string, not {key!r}")
            if _is_leaf(item):
                lines.append(f"{pad}{scalar(key)}: {_leaf(item)}")
            else:
                lines.append(f"{pad}{scalar(key)}:")
                # A list's dashes sit under its key, as PyYAML writes them.
                lines += _block(item, indent if isinstance(item, list | tuple) else indent + 2)
        return lines
    for item in value:
        if _is_leaf(item):
            lines.append(f"{pad}- {_leaf(item)}")
        else:
            inner = _block(item, indent + 2)
            lines += [f"{pad}- {inner[0][indent + 2:]}", *inner[1:]]
    return lines


def _is_leaf(value: Any) -> bool:
    return not isinstance(value, Mapping | list | tuple) or not value


def _leaf(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{}"
    if isinstance(value, list | tuple):
        return "[]"
    return scalar(value)


def scalar(value: Any) -> str:
    """One scalar as YAML reads it back: the same type and value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        if _BARE.match(value) and value.lower() not in _WORDS:
            return value
        return '"' + "".join(_char(c) for c in value) + '"'
    raise TypeError(f"cannot write {type(value).__name__} as YAML: {value!r}")


def _float(value: float) -> str:
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    # YAML 1.1 reads a float only with a dot: 1e-05 would come back a string.
    if "." not in text:
        mantissa, _, exponent = text.partition("e")
        text = f"{mantissa}.0" + (f"e{exponent}" if exponent else "")
    return text


def _char(c: str) -> str:
    if c in _ESCAPES:
        return _ESCAPES[c]
    code = ord(c)
    if _raw(code):
        return c
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
        else f"\\U{code:08x}"


def _raw(code: int) -> bool:
    # Written as itself inside double quotes: printable for YAML, and no line break (NEL,
    # U+2028, U+2029) or byte-order mark. A character class with these ranges costs 3 ms to
    # compile, more than writing a profile.
    return (0x20 <= code <= 0x7E or 0xA0 <= code <= 0xD7FF and code not in (0x2028, 0x2029)
            or 0xE000 <= code <= 0xFFFD and code != 0xFEFF or code >= 0x10000)
