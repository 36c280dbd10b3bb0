"""Output helpers: rich for people, plain JSON for scripts, diagnostics on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from hpctrain.places import Place
    from hpctrain.submission.pipeline import Outcome


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


def print_err(text: str, *, lead: str = "", style: str = "") -> None:
    """A line for a person on stderr, `lead` (`note:`) in `style` on a terminal."""
    print_line(text, err=True, lead=lead, style=style)


def print_line(text: str, *, err: bool = False, lead: str = "", style: str = "",
               bold: str = "") -> None:
    """A line for a person, `lead` in `style` and the words `bold` in bold on a terminal.
    Elsewhere plain text, as rich writes it there (no colour), whole (rich would fold stdout at
    80 columns), and without importing rich (~10 ms of a piped `render` or `submit`)."""
    stream = sys.stderr if err else sys.stdout
    if not stream.isatty():
        stream.write(f"{lead} {text}\n" if lead else f"{text}\n")
        return
    from rich.markup import escape

    shown = escape(text)
    if bold:
        shown = shown.replace(escape(bold), f"[bold]{escape(bold)}[/]", 1)
    if lead:
        shown = f"[{style}]{escape(lead)}[/] {shown}" if style else f"{escape(lead)} {shown}"
    (err_console if err else console).print(shown, highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")


def print_code(text: str, language: str) -> None:
    """Code on stdout: highlighted for a person, plain text for a pipe or a file; never a line
    break that is not in the text (a script copied from the terminal must still run)."""
    if not is_tty():
        sys.stdout.write(text)
        return
    from rich.syntax import Syntax

    highlighted = Syntax(text, language, theme="ansi_dark").highlight(text)
    # soft_wrap: long lines are the terminal's to fold, which copies them back whole.
    console.print(highlighted, soft_wrap=True, end="")


def plain_columns(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table as aligned plain text, one line a row (for a pipe: no box, never folded)."""
    lines = [tuple(columns), *(tuple(r) for r in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(columns))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
                     for line in lines) + "\n"


Shown = Callable[["Outcome[Any, Any]", "Place"], None]
AsJson = Callable[["Outcome[Any, Any]", "Place"], dict[str, object]]


@dataclass(frozen=True)
class Display:
    """How one value type is shown: to people (the scripts of a dry run are shown before),
    and as JSON (a dry run's envelope and scripts are added)."""

    people: Shown
    json: AsJson
    # A composite of other kinds' outcomes (a race across profiles): it shows its dry run
    # whole, each part as its own kind's, without the one envelope around them.
    whole: bool = False


# Each view module registers a function that imports its value types and maps each to its
# Display, asked once a value is shown: `--help` imports none of the submission modules, and a
# class moved away fails the import (and mypy), not the lookup.
_PROVIDERS: list[Callable[[], dict[type, Display]]] = []
_DISPLAYS: dict[type, Display] = {}


def register_displays(provider: Callable[[], dict[type, Display]]) -> None:
    """Show the value types `provider` returns as it says, once a value is shown."""
    _PROVIDERS.append(provider)


def displays() -> dict[type, Display]:
    """Every registered value type with its Display."""
    while _PROVIDERS:
        _DISPLAYS.update(_PROVIDERS.pop(0)())
    return _DISPLAYS


def display_of(value: object) -> Display:
    """How `value` is shown (a KeyError names a type no view module registered)."""
    return displays()[type(value)]


def result_json(outcome: Outcome[Any, Any], place: Place) -> dict[str, object]:
    """A submitted kind's result as --json shows it: the result's own `as_dict()`."""
    assert outcome.result is not None
    found: dict[str, object] = outcome.result.as_dict()
    return found
