"""Every command's --help ends with an example (newcomer review 2026-11-29, 17: `completion`
had none)."""

from __future__ import annotations

from collections.abc import Iterator

import click
import typer.main
from typer.testing import CliRunner

from hpctrain.cli import app


def _leaves(command: click.Command, path: tuple[str, ...] = ()
            ) -> Iterator[tuple[str, click.Command]]:
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _leaves(sub, (*path, name))
    else:
        yield " ".join(path), command


def test_every_command_has_an_example() -> None:
    missing = [name for name, c in _leaves(typer.main.get_command(app))
               if "Example" not in (c.epilog or "") or "hpctrain " not in (c.epilog or "")]
    assert missing == []


def test_completions_help_shows_how_to_install_it() -> None:
    res = CliRunner().invoke(app, ["completion", "--help"])
    assert res.exit_code == 0 and "hpctrain completion bash" in res.stdout.split("Example:")[1]
