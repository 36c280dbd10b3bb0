"""Rebuild profile dataclasses from plain JSON data, checking every value's type strictly.

The profile cache stores plain data, never code; this constructor trusts none of it. It
accepts exactly what `dataclasses.asdict` of a validated profile gives (every field present,
no extra ones, no coercion), runs the fields' checks and the classes' `__post_init__`, and
raises ValueError on anything else, so loading a cached profile needs no pydantic.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache
from typing import Annotated, Any, Literal, TypeVar, Union

T = TypeVar("T")

_SCALARS = (str, int, bool)


class PlainDataError(ValueError):
    """Plain data that does not match the dataclass it should rebuild."""


def from_plain(cls: type[T], data: Any) -> T:
    """Build dataclass `cls` from `data`, or raise ValueError (never TypeError or KeyError)."""
    try:
        return typing.cast(T, _build(cls, data, cls.__name__))
    except (TypeError, KeyError, RecursionError) as e:
        raise PlainDataError(f"{cls.__name__}: {e}") from e


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def _build(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin is Annotated:
        return _checked(tp, value, where)
    if origin in (Union, types.UnionType):
        return _optional(tp, value, where)
    if origin is Literal:
        return _literal(tp, value, where)
    if origin is list:
        return _list(tp, value, where)
    if origin is dict:
        return _dict(tp, value, where)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass(tp, value, where)
    if tp in _SCALARS:
        # type(), not isinstance(): a bool is an int to isinstance, and JSON keeps them apart.
        if type(value) is not tp:
            raise PlainDataError(f"{where}: expected {tp.__name__}, got {type(value).__name__}")
        if tp is str and not value.isascii():
            # JSON's \ud800 escapes give lone surrogates, which no script or terminal can hold.
            value.encode("utf-8")
        return value
    raise PlainDataError(f"{where}: unsupported field type {tp!r}")


def _checked(tp: Any, value: Any, where: str) -> Any:
    base, *marks = typing.get_args(tp)
    out = _build(base, value, where)
    for mark in marks:
        check = getattr(mark, "check", None)
        if check is not None:
            try:
                check(out)
            except ValueError as e:
                raise PlainDataError(f"{where}: {e}") from e
    return out


def _optional(tp: Any, value: Any, where: str) -> Any:
    args = typing.get_args(tp)
    if value is None and type(None) in args:
        return None
    others = [a for a in args if a is not type(None)]
    if len(others) != 1:
        raise PlainDataError(f"{where}: unsupported union {tp!r}")
    return _build(others[0], value, where)


def _literal(tp: Any, value: Any, where: str) -> Any:
    if not any(type(value) is type(a) and value == a for a in typing.get_args(tp)):
        raise PlainDataError(f"{where}: {value!r} is not one of {typing.get_args(tp)}")
    return value


def _list(tp: Any, value: Any, where: str) -> list[Any]:
    if type(value) is not list:
        raise PlainDataError(f"{where}: expected a list")
    (item,) = typing.get_args(tp)
    return [_build(item, v, f"{where}.{i}") for i, v in enumerate(value)]


def _dict(tp: Any, value: Any, where: str) -> dict[str, Any]:
    key_type, item = typing.get_args(tp)
    if type(value) is not dict or key_type is not str:
        raise PlainDataError(f"{where}: expected a mapping with string keys")
    return {_build(str, k, where): _build(item, v, f"{where}.{k}") for k, v in value.items()}


def _dataclass(cls: type, value: Any, where: str) -> Any:
    if type(value) is not dict:
        raise PlainDataError(f"{where}: expected a mapping")
    hints = _hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    if set(value) != set(names):
        diff = sorted(set(value) ^ set(names), key=str)
        raise PlainDataError(f"{where}: fields differ from {cls.__name__}'s: {diff}")
    return cls(**{n: _build(hints[n], value[n], f"{where}.{n}") for n in names})
