"""What a compiled template (render/_compiled/) needs of Jinja's runtime, without Jinja: its
lookups of names and attributes (StrictUndefined's error where there is none) and `join`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class UndefinedError(Exception):
    """A name or attribute the template uses is not there (Jinja's StrictUndefined)."""


def attribute(obj: Any, name: str) -> Any:
    """`obj.name` as Jinja reads it: an attribute, else an item."""
    try:
        return getattr(obj, name)
    except AttributeError:
        pass
    try:
        return obj[name]
    except (TypeError, LookupError):
        raise UndefinedError(f"{type(obj).__name__!s} has no attribute {name!r}") from None


def variable(ctx: Mapping[str, Any], name: str) -> Any:
    """A name the template's values define."""
    try:
        return ctx[name]
    except KeyError:
        raise UndefinedError(f"{name!r} is undefined") from None


def join(value: Iterable[Any], d: object = "") -> str:
    """Jinja's `join` filter."""
    return str(d).join(map(str, value))
