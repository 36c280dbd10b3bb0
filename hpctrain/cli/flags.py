"""How an option is declared, as data: its flags, help, value name, bound and completion.

Typer-free: a command that `cli/argv.py` reads without click imports these, and the options
shared by commands that must stay light (`--login`: status) are declared here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hpctrain.cli import completion


@dataclass(frozen=True)
class Flags:
    """How a job option is typed: its flags, help, value name, lower bound and completion."""

    decls: tuple[str, ...]
    help: str
    metavar: str | None = None
    min: int | None = None
    completion: Callable[..., list[completion.Item]] | None = None
    # The command's trailing argument rather than an option.
    argument: bool = False
    # Accepted, and left out of --help.
    hidden: bool = False

    def declaration(self) -> Any:
        """The typer declaration of this row (typer is imported only by the commands click
        parses: cli/argv.py parses a plain `render` from the rows themselves)."""
        import typer

        if self.argument:
            return typer.Argument(help=self.help)
        return typer.Option(*self.decls, help=self.help, metavar=self.metavar, min=self.min,
                            autocompletion=self.completion, hidden=self.hidden)


# Where a command goes: through this ssh destination instead of the profile's login.
LOGIN = Flags(("--login",), "Through this ssh destination (as you would type it after `ssh`) "
              "instead of the profile's `login` host; docs/remote.md.", metavar="DEST")
