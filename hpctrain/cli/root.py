"""The typer app of the command line: its root group and the command modules it registers.

Imported only by a command that click parses (hpctrain/cli/__init__.py's `main` runs a plain
`render` without it: cli/argv.py).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import click
import typer
from typer.core import TyperGroup

from hpctrain import __version__
from hpctrain.cli.commands import MODULE_OF, MODULES, SUMMARY, state, top_level


def _version(value: bool) -> None:
    if value:
        typer.echo(f"hpctrain {__version__}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
    debug: bool = typer.Option(
        False, "--debug",
        help="Show tracebacks for errors, and every SLURM command with the output format used."),
) -> None:
    state["debug"] = debug
    if debug:
        import logging

        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("debug: %(name)s: %(message)s"))
        logger = logging.getLogger("hpctrain")
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)


def build_app(args: Sequence[str] | None = None) -> typer.Typer:
    """The root app with the command modules `args` needs (all of them when args is None)."""
    app = typer.Typer(
        name="hpctrain",
        cls=_Root,
        help="Train on SLURM clusters: validated sbatch scripts from cluster profiles, "
        "job lifecycle, a packaged Lightning trainer and a local dev cluster.\n\n"
        "Example: hpctrain render --profile raven --nodes 2 --dry-run",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        # Plain click help: typer's rich help imports rich and markdown-it (~100 ms), which a
        # login node pays on every `--help`.
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_root)
    # Root options are flags only, so the first word that is not an option names the command.
    command = next((a for a in args or () if not a.startswith("-")), None)
    # The root's help and an unknown command's error need only names and SUMMARY (_Root).
    wanted = MODULES if args is None else (MODULE_OF[command],) if command in MODULE_OF else ()
    for name in wanted:
        # Each module imports its heavy parts (torch, sqlite3, rich tables) inside its commands.
        importlib.import_module(f"hpctrain.cli.{name}").register(app)
    _summarize(app, "")
    return app


class _Root(TyperGroup):
    """The root group, listing every command from MODULE_OF and SUMMARY: `hpctrain --help`
    and a mistyped command import no command module (each costs its signatures' inspection).
    tests/unit/test_cli.py checks that the listing is the one the whole app prints."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return top_level()

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        found = super().get_command(ctx, name)
        if found is not None or name not in MODULE_OF:
            return found
        # Not registered by the first word (shell completion of the command's name): the app
        # that command line would have built, and its command.
        group = typer.main.get_command(build_app([name]))
        assert isinstance(group, click.Group)
        return group.commands.get(name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, SUMMARY[name]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return click.Group.resolve_command(self, ctx, args)
        except click.UsageError as e:
            from difflib import get_close_matches

            matches = get_close_matches(args[0], top_level()) if args else []
            if not matches:
                raise
            close = ", ".join(repr(m) for m in matches)
            raise click.UsageError(f"{e.message.rstrip('.')}. Did you mean {close}?",
                                   e.ctx) from None


def command_name(info: typer.models.CommandInfo) -> str:
    """A registered command's name, as typer derives it from the function when not given."""
    assert info.callback is not None
    return info.name or info.callback.__name__.lower().replace("_", "-")


def _summarize(app: typer.Typer, prefix: str) -> None:
    """Give every command and group of `app` its SUMMARY line as click's short help."""
    for info in app.registered_commands:
        info.short_help = SUMMARY.get(prefix + command_name(info), info.short_help)
    for group in app.registered_groups:
        sub = group.typer_instance
        assert sub is not None and isinstance(sub.info.name, str)
        group.short_help = SUMMARY.get(prefix + sub.info.name, group.short_help)
        _summarize(sub, f"{prefix}{sub.info.name} ")
