"""Output helpers: rich for people, plain JSON for scripts, diagnostics on stderr."""

from __future__ import annotations

import json
import sys
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


@cache
def _console(stderr: bool) -> Console:
    # rich.console costs ~10 ms to import: only pay it when something is shown to a person.
    from rich.console import Console

    return Console(stderr=stderr, soft_wrap=stderr)


class _LazyConsole:
    def __init__(self, stderr: bool) -> None:
        self._stderr = stderr

    def __getattr__(self, name: str) -> Any:
        return getattr(_console(self._stderr), name)


console: Console = _LazyConsole(stderr=False)  # type: ignore[assignment]
err_console: Console = _LazyConsole(stderr=True)  # type: ignore[assignment]


def is_tty() -> bool:
    return sys.stdout.isatty()


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def print_code(text: str, language: str) -> None:
    """Code on stdout: highlighted for a person, plain text for a pipe or a file."""
    if is_tty():
        from rich.syntax import Syntax

        console.print(Syntax(text, language, theme="ansi_dark", word_wrap=True))
    else:
        sys.stdout.write(text)
