"""Compiled dataclass methods kept between CLI processes, as Python keeps a module's .pyc.

A dataclass writes its `__init__`, `__repr__`, `__eq__`, `__hash__` and frozen `__setattr__`
as source text and compiles it when its module is imported: a submit imports about 90 of them,
and compiling their 500 methods took 24 ms of its 140 ms (CPython 3.10 to 3.12; 3.13 compiles a
class's methods at once, still every process). Those texts are the same from one process to
the next, so the CLI keeps each text's code object in a marshal file per interpreter and
command (`state/cache/code/<cache_tag>/<command>.marshal`) and hands dataclasses the kept
object instead of the text. The key is the whole text: a changed class compiles anew, and
nothing else can differ.

Marshal, like a .pyc, holds code: a file is used only where the user owns it and nobody else
may write it, and anything unexpected in it (another interpreter's format, a bad shape, a
truncated write) reads as an empty cache. Writing it is best effort, once, at exit, and only
when something new was compiled.
"""

import atexit
import builtins
import contextlib
import dataclasses
import marshal
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from types import CodeType
from typing import Any

from hpctrain.files import paths
from hpctrain.files.atomic import read_own_file, write_atomic

# About 600 KB for what every command compiles; a file far larger is not ours.
_MAX_BYTES = 16 << 20
# Texts of classes since changed accumulate; past this many the file keeps what one process used.
_MAX_ENTRIES = 5000


class CodeCache:
    """Code objects by their source text, read from and written back to one file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.codes: dict[str, CodeType] = _read(path)
        self.used: set[str] = set()
        self.new = 0

    def exec(self, source: Any, globals: Any = None, locals: Any = None, /) -> None:
        """builtins.exec, with a source text compiled once per text and cache file."""
        if type(source) is str:
            code = self.codes.get(source)
            if code is None:
                # As exec(text) compiles it: a file name of "<string>", and no __future__
                # flags taken from this module (dont_inherit).
                code = compile(source, "<string>", "exec", dont_inherit=True)
                self.codes[source] = code
                self.new += 1
            self.used.add(source)
            source = code
        builtins.exec(source, globals, locals)

    def save(self) -> None:
        """Write the file if this process compiled anything; never raises."""
        if not self.new:
            return
        keep = self.codes
        if len(keep) > _MAX_ENTRIES:
            keep = {text: self.codes[text] for text in self.used}
        # A read-only or full home: the next process compiles again.
        with contextlib.suppress(OSError, ValueError):
            _write(self.path, marshal.dumps(keep))


def cache_path(command: str) -> str:
    """The file of one command's code (`root`: no command, as --help)."""
    return os.path.join(paths.state_dir(), "cache", "code", sys.implementation.cache_tag or "",
                        f"{command}.marshal")


def command_of(argv: Sequence[str]) -> str:
    """The command a command line runs, as its cache file is named: each command loads only
    the code it compiles (all of a submit's is 600 KB, 1.5 ms to read; --help needs little)."""
    word = next((a for a in argv if not a.startswith("-")), "root")
    return word if re.fullmatch(r"[a-z][a-z-]{0,30}", word) else "root"


def install(argv: Sequence[str]) -> CodeCache | None:
    """Let dataclasses created from now on in this process use the cache of the command
    `argv` runs; saved at exit where that is one of hpctrain's commands."""
    if sys.implementation.cache_tag is None or os.environ.get("HPCTRAIN_CODE_CACHE") == "0":
        return None
    command = command_of(argv)
    cache = CodeCache(cache_path(command))
    # dataclasses calls exec(text, globals, ns) by this module-level name (3.10 to 3.13); a
    # later version that calls something else just compiles as before.
    dataclasses.exec = cache.exec  # type: ignore[attr-defined]
    atexit.register(_save, cache, command)
    return cache


def _save(cache: CodeCache, command: str) -> None:
    # A mistyped command would leave a file named after each typo. The command table is read
    # from the module the command line loaded: start-up sits below the CLI and imports none of it.
    known = getattr(sys.modules.get("hpctrain.cli.commands"), "MODULE_OF", {})
    if command == "root" or command in known:
        cache.save()


def _read(path: str) -> dict[str, CodeType]:
    # Code another user could have written is never run, as Python treats no .pyc so.
    raw = read_own_file(path, _MAX_BYTES)
    if raw is None:
        return {}
    try:
        codes = marshal.loads(raw)
    except (ValueError, EOFError, TypeError):
        return {}
    if type(codes) is not dict or not all(
            type(k) is str and type(v) is CodeType for k, v in codes.items()):
        return {}
    return codes


def _write(path: str, data: bytes) -> None:
    Path(path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(Path(path), data, 0o600)
