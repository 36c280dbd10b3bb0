"""How an option is declared, as data: its flags, help, value name, bound and completion.

Typer-free: a command that `cli/argv.py` reads without click imports these, and the options
shared by commands that must stay light (`--login`, `--json`: status, render) are declared here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

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

    def declaration(self, help: str | None = None) -> Any:
        """The typer declaration of this row (typer is imported only by the commands click
        parses: cli/argv.py parses a plain `render` from the rows themselves); `help` words it
        for a command where the option's default means something else (rerun: the job's own)."""
        import typer

        said = self.help if help is None else help
        if self.argument:
            return typer.Argument(help=said)
        return typer.Option(*self.decls, help=said, metavar=self.metavar, min=self.min,
                            autocompletion=self.completion, hidden=self.hidden)


# Where a command goes: through this ssh destination instead of the profile's login.
LOGIN = Flags(("--login",), "Through this ssh destination (as you would type it after `ssh`) "
              "instead of the profile's `login` host; docs/remote.md.", metavar="DEST")

# Every command's --json, whatever its JSON holds (docs/jobs.md, "JSON shapes").
JSON = Flags(("--json",), "Machine-readable output: JSON on stdout.")


def __getattr__(name: str) -> Any:
    # JsonOpt, the typer declaration, made when a command that click parses asks for it.
    if name == "JsonOpt":
        return Annotated[bool, JSON.declaration()]
    raise AttributeError(name)
