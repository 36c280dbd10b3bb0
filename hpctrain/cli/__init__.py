"""The hpctrain command line: one typer app, one error boundary."""

from __future__ import annotations

import sys

import typer

from hpctrain import __version__
from hpctrain.cli.output import err_console
from hpctrain.errors import HpctrainError

app = typer.Typer(
    name="hpctrain",
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

_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"hpctrain {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
) -> None:
    _state["debug"] = debug


def _register() -> None:
    # Each module imports its heavy parts (torch, sqlite3, rich tables) inside its commands.
    from hpctrain.cli import data, devcluster, jobs, profiles, render, submit, train

    for module in (render, submit, jobs, train, profiles, devcluster, data):
        module.register(app)


_register()


def main() -> None:
    """Entry point: run the app behind the one error boundary."""
    try:
        # Without standalone mode click returns the exit code of typer.Exit instead of raising.
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except HpctrainError as e:
        if _state["debug"]:
            raise
        err_console.print(f"[bold red]Error:[/] {e.what}", highlight=False, markup=True)
        if e.fix:
            err_console.print(f"  [bold]Fix:[/] {e.fix}", highlight=False)
        sys.exit(1)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        err_console.print("Aborted.")
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:  # click usage errors and the like
        import click

        if isinstance(e, click.exceptions.ClickException):
            e.show()
            sys.exit(e.exit_code)
        if isinstance(e, click.exceptions.Exit):
            sys.exit(e.exit_code)
        raise
