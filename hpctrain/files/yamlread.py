"""Read a small YAML input file safely: bounded size, UTF-8 text, and bounded expansion.

Profiles and trainer configs come from users and may be anything: a directory, a binary
file, a FIFO, or a YAML alias bomb ("billion laughs") that a few hundred bytes expand into
billions of values. The loader itself shares aliased values, so the bomb only explodes in
what walks the result (merging, hashing, validation); the event pass below counts the
values as they would be expanded, and stops at the first one over the limits.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

# libyaml's parser is ten times faster than the pure-Python one, where it is built.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Shipped profiles take a few kilobytes, trainer configs less; these limits are far above.
MAX_BYTES = 1 << 20
MAX_VALUES = 100_000
MAX_DEPTH = 64


class YamlInputError(Exception):
    """A YAML input that cannot be read or would not fit in memory; says what and how to fix."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(what)
        self.what = what
        self.fix = fix


def read_text(path: Path) -> str:
    """The file's text: a regular, not too large, UTF-8 file without NUL bytes."""
    data = _read_bytes(path)
    if b"\x00" in data:
        raise YamlInputError("is a binary file (it contains NUL bytes)", "give a YAML text file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise YamlInputError(
            f"is not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r})",
            "save it as UTF-8 (e.g. `iconv -t UTF-8`)",
        ) from None


def _read_bytes(path: Path) -> bytes:
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; the type check refuses it.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise YamlInputError("does not exist", "check the path") from None
    except OSError as e:
        raise YamlInputError(f"cannot be read ({e.strerror})", "check the path") from None
    try:
        _check_regular(os.fstat(fd).st_mode)
        return _read_some(fd)
    finally:
        os.close(fd)


def _check_regular(mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise YamlInputError("is a directory", "give a YAML file")
    if not stat.S_ISREG(mode):
        raise YamlInputError("is not a regular file", "give a YAML file")


def _read_some(fd: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= MAX_BYTES and (chunk := os.read(fd, MAX_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise YamlInputError(f"cannot be read ({e.strerror})", "check the file") from None
    data = b"".join(chunks)
    if len(data) > MAX_BYTES:
        raise YamlInputError(
            f"is larger than {MAX_BYTES // 1024} KiB", "a profile or config is a few KiB"
        )
    return data


def load(text: str) -> Any:
    """Parse YAML text with the safe loader once it is known to expand to a bounded size."""
    # Syntax errors raise yaml.YAMLError, as from yaml.safe_load; anything over the limits,
    # or a value Python cannot hold (an integer of thousands of digits), YamlInputError.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Bytes that are not UTF-8 (an argv or a file name) reach Python as lone surrogates.
        raise YamlInputError("contains bytes that are not UTF-8 text", "use UTF-8") from None
    check_expansion(text)
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
    except ValueError as e:
        # Python's own words up to the first colon name the problem without the advice.
        why = str(e).split(":", 1)[0]
        raise YamlInputError(f"holds a value that cannot be read ({why})", "fix it") from None


def compose(text: str) -> Any:
    """The YAML node tree of `text`, with each node's line and column (for error locations)."""
    check_expansion(text)
    return yaml.compose(text, Loader=_Loader)


def syntax_error(e: yaml.YAMLError) -> YamlInputError:
    """PyYAML's syntax error as where (line, column) and what, and a fix that names both."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    context = getattr(e, "context", None)
    what = f"{problem} ({context})" if context else problem
    if mark is None:
        return YamlInputError(f"is not valid YAML: {what}", "fix the YAML")
    where = f"line {mark.line + 1}, column {mark.column + 1}"
    return YamlInputError(
        f"{where}: not valid YAML: {what}",
        f"fix the YAML at {where} ({problem}); quote values that hold ': ', '#', '[' or '{{'",
    )


def check_expansion(text: str) -> None:
    """Refuse YAML whose values, with every alias expanded, exceed MAX_VALUES or MAX_DEPTH."""
    counter = _Expansion()
    for event in yaml.parse(text, Loader=_Loader):
        counter.feed(event)


class _Expansion:
    """Counts values and depth over a stream of parser events, aliases counted in full."""

    def __init__(self) -> None:
        # Open collections: [anchor, values inside so far, height so far].
        self.open: list[list[Any]] = []
        self.anchored: dict[str, tuple[int, int]] = {}
        self.total = 0

    def feed(self, event: yaml.Event) -> None:
        if isinstance(event, yaml.CollectionStartEvent):
            self.open.append([event.anchor, 1, 1])
            self._grow(1, 1)
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, size, height = self.open.pop()
            if anchor is not None:
                self.anchored[anchor] = (size, height)
            self._add_to_parent(size, height)
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                self.anchored[event.anchor] = (1, 1)
            self._grow(1, 1)
            self._add_to_parent(1, 1)
        elif isinstance(event, yaml.AliasEvent) and event.anchor is not None:
            self._alias(event.anchor)

    def _alias(self, anchor: str) -> None:
        if any(entry[0] == anchor for entry in self.open):
            raise YamlInputError(f"has an alias *{anchor} inside its own anchor", "remove it")
        # An undefined alias is left to the loader, which reports it with its line.
        size, height = self.anchored.get(anchor, (1, 1))
        self._grow(size, height)
        self._add_to_parent(size, height)

    def _grow(self, size: int, height: int) -> None:
        self.total += size
        if self.total > MAX_VALUES:
            raise YamlInputError(
                f"expands to more than {MAX_VALUES} values (aliases counted in full)",
                "write the values out, without nested aliases",
            )
        if len(self.open) + height - 1 > MAX_DEPTH:
            raise YamlInputError(f"nests deeper than {MAX_DEPTH} levels", "flatten it")

    def _add_to_parent(self, size: int, height: int) -> None:
        if self.open:
            parent = self.open[-1]
            parent[1] += size
            parent[2] = max(parent[2], height + 1)
